export { BackendUnavailableError, QueryError } from './errors.js';
export type { QueryErrorDetail, QueryErrorInit } from './errors.js';
export { generateDataset, generateListings, DEFAULT_REFERENCE } from './generate/dataset.js';
export type { GenerateOptions, GenerateDatasetOptions, GenerateSummary } from './generate/dataset.js';
export type { GeneratedListing, JsonRecord } from './generate/listing.js';
export { parseQuery } from './odata/parse-query.js';
export type {
  AggregateCount,
  AggregateItem,
  AggregateMethod,
  AggregateTransformation,
  AggregateWith,
  AndExpr,
  ApplyTransformation,
  ArithmeticExpr,
  ArithmeticOperator,
  BooleanLiteral,
  CallExpr,
  CompareExpr,
  CompareOperator,
  DateLiteral,
  DateTimeOffsetLiteral,
  ExpandItem,
  ExpandOptions,
  Expr,
  ExprKind,
  FilterTransformation,
  FunctionName,
  GeographyPointLiteral,
  GroupByTransformation,
  InExpr,
  LambdaExpr,
  ListExpr,
  LiteralExpr,
  MemberExpr,
  NegateExpr,
  NotExpr,
  NullLiteral,
  NumberLiteral,
  OrderByItem,
  OrExpr,
  ParsedQuery,
  SelectItem,
  SelectProperty,
  SelectStar,
  StringLiteral,
} from './odata/ast.js';
export { DataError } from './store/errors.js';
export type { DataErrorInfo } from './store/errors.js';
export type { LoadReport, ResourceLoadReport } from './store/store.js';
export type { LocalFieldInfo } from './store/ingest.js';
export type { EdmType, FieldDef, FieldOrigin, RecordResourceName, ResourceName } from './schema/types.js';
export {
  Engine,
  DEFAULT_PAGE_SIZE,
  TOP_LIMITS,
  NAVIGATION_PROPERTIES,
  NAVIGATION_TOP_LIMITS,
  PAGE_SNAPSHOT_TTL_MS,
  MAX_PINNED_GENERATIONS,
  COMPACT_FRACTION,
  EVENT_RETENTION_MS,
  PostgresEngine,
} from './engine.js';
export type { ChangeOperation, ChangeSummary } from './live/change.js';
export type { Distribution } from './pg/distribution.js';
export { SnapshotError } from './snapshot/file.js';
export type { SnapshotErrorCode } from './snapshot/file.js';
export type {
  EngineOpenOptions,
  ExplainOptions,
  NavigationName,
  NavigationRequest,
  Plan,
  PostgresOpenOptions,
  PostgresOptions,
  QueryInput,
  QueryOptions,
  QueryResource,
  QueryResult,
} from './engine.js';
export type { AccessPath, LookupTerm, OrderStrategy, Page } from './plan/plan.js';
export { createHandler } from './service/handler.js';
export type { Handler, HandlerOptions, ServiceEngine } from './service/handler.js';
export type { Account, AccountsFile } from './service/accounts.js';
export type { MlsProfile, ProfilesFile } from './service/profiles.js';
export type { LoginThrottleOptions, RateLimitOptions } from './service/auth.js';
export type { Limits } from './service/request.js';
export { serve } from './adapters/http.js';
export type { RequestHandler, ServeOptions, Server } from './adapters/http.js';
export { startTestServer } from './adapters/test-server.js';
export type { TestAccount, TestServer, TestServerOptions } from './adapters/test-server.js';
export { TestClock, parseDuration, parseInstant } from './harness/clock.js';
export type { ClockState } from './harness/clock.js';
export { Harness } from './harness/harness.js';
export type { HarnessOptions } from './harness/harness.js';
export type { FaultAction, FaultRule, FaultSet } from './harness/faults.js';
export type { JournalEntry } from './harness/journal.js';
export type { LimitsProfile } from './harness/limits.js';
export { replicate } from './replicate/replicate.js';
export type { ReplicateOptions, ReplicationProgress, ReplicationResult, ResourceCounts } from './replicate/replicate.js';
export { ReplicationError } from './replicate/errors.js';
export type { ReplicationErrorCode } from './replicate/errors.js';
export { DirectorySink } from './replicate/directory-sink.js';
export type { DirectorySinkOptions } from './replicate/directory-sink.js';
export { EngineSink } from './replicate/engine-sink.js';
export type { EngineSinkOptions } from './replicate/engine-sink.js';
export { REPLICATED_RESOURCES } from './replicate/sink.js';
export type { Cursor, RemovedCounts, ReplicatedResource, ReplicationSink, ReplicationState, ResourceState } from './replicate/sink.js';
export type { FetchLike } from './replicate/upstream.js';
