export { QueryError } from './errors.js';
export type { QueryErrorDetail, QueryErrorInit } from './errors.js';
export { generateDataset, generateListings, DEFAULT_REFERENCE } from './generate/dataset.js';
export type { GenerateOptions, GenerateDatasetOptions, GenerateSummary } from './generate/dataset.js';
export type { GeneratedListing, JsonRecord } from './generate/listing.js';
export { parseQuery } from './odata/parse-query.js';
export type { AggregateCount, AggregateItem, AggregateMethod, AggregateTransformation, AggregateWith, AndExpr, ApplyTransformation, ArithmeticExpr, ArithmeticOperator, BooleanLiteral, CallExpr, CompareExpr, CompareOperator, DateLiteral, DateTimeOffsetLiteral, ExpandItem, ExpandOptions, Expr, ExprKind, FilterTransformation, FunctionName, GeographyPointLiteral, GroupByTransformation, InExpr, LambdaExpr, ListExpr, LiteralExpr, MemberExpr, NegateExpr, NotExpr, NullLiteral, NumberLiteral, OrderByItem, OrExpr, ParsedQuery, SelectItem, SelectProperty, SelectStar, StringLiteral } from './odata/ast.js';
