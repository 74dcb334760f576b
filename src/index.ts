export { QueryError } from './errors.js';
export type { QueryErrorDetail, QueryErrorInit } from './errors.js';
export { generateDataset, generateListings, DEFAULT_REFERENCE } from './generate/dataset.js';
export type { GenerateOptions, GenerateDatasetOptions, GenerateSummary } from './generate/dataset.js';
export type { GeneratedListing, JsonRecord } from './generate/listing.js';
