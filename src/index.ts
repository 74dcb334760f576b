export { QueryError } from './errors.js';
export type { QueryErrorDetail, QueryErrorInit } from './errors.js';
