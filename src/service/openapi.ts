/**
 * `GET /v1/openapi.json`: an OpenAPI 3.1 description of every route the server answers: the
 * token, account and profile routes, the OData data routes (their query options and headers;
 * what an option means is OData's, linked rather than restated), health, readiness and metrics,
 * and the test harness's `/admin/*` routes (present only when the server has an admin token),
 * each with its error object. Public (a client generator needs it before it has a token) and the
 * same for every caller; built once.
 */
import { ServiceError } from './errors.js';
import { JSON_TYPE, textResponse, type ServiceResponse } from './respond.js';

type Json = Record<string, unknown>;

const ref = (name: string): Json => ({ $ref: `#/components/schemas/${name}` });
const errorRef = (name: string): Json => ({ $ref: `#/components/responses/${name}` });
const json = (schema: Json, description: string): Json => ({ description, content: { 'application/json': { schema } } });
const query = (name: string, description: string, schema: Json = { type: 'string' }): Json => ({ name, in: 'query', required: false, description, schema });
const header = (name: string, description: string): Json => ({ name, in: 'header', required: false, description, schema: { type: 'string' } });

const RESOURCES = ['Property', 'Media', 'OpenHouse', 'Member', 'Office', 'Lookup', 'EntityEvent'];
const WRITABLE = ['Property', 'Media', 'OpenHouse', 'Member', 'Office'];
const ODATA = 'https://docs.oasis-open.org/odata/odata/v4.01/odata-v4.01-part2-url-conventions.html';

/** The errors every authenticated data route may answer. */
const DATA_ERRORS = { '400': errorRef('BadRequest'), '401': errorRef('Unauthorized'), '429': errorRef('TooManyRequests'), '503': errorRef('Unavailable') };
const CONDITIONAL = {
  '304': { description: 'Not Modified: the If-None-Match header names the current ETag.', headers: { ETag: { $ref: '#/components/headers/ETag' } } },
};
const OK_HEADERS = { ETag: { $ref: '#/components/headers/ETag' }, 'OData-Version': { $ref: '#/components/headers/ODataVersion' } };

const collectionOptions = [
  query('$filter', `A boolean expression (${ODATA}); search.text(...) and geo.distance(...) included.`),
  query('$select', 'Comma-separated fields to return.'),
  query('$orderby', 'Comma-separated fields, each optionally asc or desc.'),
  query('$top', 'Records per page, up to the resource maximum.', { type: 'integer', minimum: 0 }),
  query('$skip', 'Records to skip.', { type: 'integer', minimum: 0 }),
  query('$count', 'true to include @odata.count.', { type: 'boolean' }),
  query('$expand', 'Navigation properties to include (Property only).'),
  query('$apply', 'Aggregation (groupby, aggregate, filter).'),
  query('$ignorenulls', 'true to leave null fields out of records.', { type: 'boolean' }),
  query('$format', 'json only.', { type: 'string', enum: ['json'] }),
  query('$skiptoken', 'Set by @odata.nextLink; follow that link as it is.'),
];
const dataHeaders = [
  header('Prefer', 'odata.maxpagesize=N (echoed in Preference-Applied).'),
  header('If-None-Match', 'ETags of representations the client holds; a match is a 304.'),
  header('OData-MaxVersion', '4.0 or 4.01 (default).'),
  header('X-Request-Id', 'A request id (at most 128 of A-Z a-z 0-9 - . _ ~ : @ + = /) echoed on the response and in the access log.'),
];

function adminOperation(summary: string, body: Json | null, result: Json): Json {
  return {
    tags: ['admin'],
    summary,
    security: [{ adminToken: [] }],
    ...(body === null ? {} : { requestBody: { required: true, content: { 'application/json': { schema: body } } } }),
    responses: {
      '200': json(result, 'The state after the operation.'),
      '400': errorRef('BadRequest'),
      '401': errorRef('Unauthorized'),
      '405': errorRef('MethodNotAllowed'),
    },
  };
}

function document(): Json {
  const anyObject = { type: 'object', additionalProperties: true };
  return {
    openapi: '3.1.0',
    info: {
      title: 'reso-engine',
      version: '1',
      description:
        'A RESO Web API (OData 4.01) over real-estate listings. Get a token from POST /v1/token and send it as Authorization: Bearer <token> on every other /v1 route.',
    },
    tags: [
      { name: 'auth' },
      { name: 'account' },
      { name: 'data', description: `OData routes; query options as in ${ODATA}` },
      { name: 'operations', description: 'Health, readiness, metrics and this document.' },
      { name: 'admin', description: 'The test harness (serve --admin-token): present only when the server has an admin token.' },
    ],
    security: [{ bearer: [] }],
    paths: {
      '/': {
        get: {
          tags: ['explorer'],
          summary: 'The explorer page (also at /explorer): a browser client of this API, served from the package.',
          security: [],
          responses: { '200': { description: 'HTML.', content: { 'text/html': { schema: { type: 'string' } } } }, '304': { description: 'Not modified.' } },
        },
      },
      '/explorer': {
        get: {
          tags: ['explorer'],
          summary: 'The explorer page.',
          security: [],
          responses: { '200': { description: 'HTML.', content: { 'text/html': { schema: { type: 'string' } } } }, '304': { description: 'Not modified.' } },
        },
      },
      '/explorer/{file}': {
        parameters: [{ name: 'file', in: 'path', required: true, schema: { type: 'string' } }],
        get: {
          tags: ['explorer'],
          summary: "The page's scripts, style sheet and icon.",
          security: [],
          responses: { '200': { description: 'The file.' }, '304': { description: 'Not modified.' }, '404': errorRef('NotFound') },
        },
      },
      '/health': {
        get: {
          tags: ['operations'],
          summary: 'The process answers.',
          security: [],
          responses: { '200': json(ref('Health'), 'Up.'), '405': errorRef('MethodNotAllowed') },
        },
      },
      '/ready': {
        get: {
          tags: ['operations'],
          summary: 'Whether the server should get traffic: data loaded, replication caught up once, database answering.',
          security: [],
          responses: {
            '200': json(ref('Readiness'), 'Ready.'),
            '503': json(ref('Readiness'), 'Not ready; reasons says why.'),
            '405': errorRef('MethodNotAllowed'),
          },
        },
      },
      '/metrics': {
        get: {
          tags: ['operations'],
          summary: 'Prometheus metrics (text format 0.0.4): loopback clients, or clients sending the metrics token.',
          security: [{}, { metricsToken: [] }],
          responses: {
            '200': { description: 'The metrics.', content: { 'text/plain': { schema: { type: 'string' } } } },
            '401': errorRef('Unauthorized'),
            '403': errorRef('Forbidden'),
            '404': errorRef('NotFound'),
          },
        },
      },
      '/v1/openapi.json': {
        get: { tags: ['operations'], summary: 'This document.', security: [], responses: { '200': json({ type: 'object' }, 'OpenAPI 3.1.'), ...CONDITIONAL } },
      },
      '/v1/token': {
        post: {
          tags: ['auth'],
          summary: 'An access token for a username and password.',
          security: [],
          requestBody: {
            required: true,
            content: {
              'application/x-www-form-urlencoded': {
                schema: { type: 'object', required: ['username', 'password'], properties: { username: { type: 'string' }, password: { type: 'string' } } },
              },
            },
          },
          responses: {
            '200': json(ref('Token'), 'A bearer token (Cache-Control: no-store).'),
            '400': errorRef('BadRequest'),
            '405': errorRef('MethodNotAllowed'),
            '413': errorRef('TooLarge'),
            '429': errorRef('TooManyRequests'),
          },
        },
      },
      '/v1/account/resources': {
        get: {
          tags: ['account'],
          summary: 'The listing sources this account may use.',
          responses: { '200': json(ref('AccountResources'), 'The sources.'), ...CONDITIONAL, ...DATA_ERRORS },
        },
      },
      '/v1/listings/mls_profiles': {
        get: {
          tags: ['account'],
          summary: "The account's sources' MLS profiles (disclaimer, logo, update frequency).",
          responses: { '200': json(ref('Profiles'), 'The profiles.'), ...CONDITIONAL, ...DATA_ERRORS },
        },
      },
      '/v1/listings/data/': {
        get: {
          tags: ['data'],
          summary: 'The OData service document: the entity sets.',
          parameters: [query('$format', 'json only.'), ...dataHeaders],
          responses: { '200': json(anyObject, 'The service document.'), ...CONDITIONAL, ...DATA_ERRORS },
        },
      },
      '/v1/listings/data/$metadata': {
        get: {
          tags: ['data'],
          summary: 'The CSDL (EDMX XML) of every entity type.',
          parameters: [query('$format', 'xml only.'), ...dataHeaders],
          responses: {
            '200': { description: 'EDMX.', headers: OK_HEADERS, content: { 'application/xml': { schema: { type: 'string' } } } },
            ...CONDITIONAL,
            ...DATA_ERRORS,
          },
        },
      },
      '/v1/listings/data/{resource}': {
        parameters: [{ name: 'resource', in: 'path', required: true, schema: { type: 'string', enum: RESOURCES } }],
        get: {
          tags: ['data'],
          summary: 'A page of records visible to the account.',
          parameters: [...collectionOptions, ...dataHeaders],
          responses: {
            '200': { ...json(ref('Envelope'), 'A page (large pages are streamed, without an ETag).'), headers: OK_HEADERS },
            ...CONDITIONAL,
            ...DATA_ERRORS,
            '404': errorRef('NotFound'),
            '405': errorRef('MethodNotAllowed'),
            '414': errorRef('TooLarge'),
          },
        },
        post: {
          tags: ['data'],
          summary: `Admin accounts: upsert records (${WRITABLE.join(', ')}) of their sources, as one change.`,
          requestBody: { required: true, content: { 'application/json': { schema: { oneOf: [{ type: 'array', items: anyObject }, ref('Envelope')] } } } },
          responses: { '200': json(ref('ChangeSummary'), 'Applied.'), ...DATA_ERRORS, '405': errorRef('MethodNotAllowed'), '413': errorRef('TooLarge') },
        },
      },
      '/v1/listings/data/{resource}/$count': {
        parameters: [{ name: 'resource', in: 'path', required: true, schema: { type: 'string', enum: RESOURCES } }],
        get: {
          tags: ['data'],
          summary: 'How many visible records match $filter (text/plain).',
          parameters: [collectionOptions[0], ...dataHeaders],
          responses: { '200': { description: 'The count.', content: { 'text/plain': { schema: { type: 'string' } } } }, ...CONDITIONAL, ...DATA_ERRORS },
        },
      },
      '/v1/listings/data/{resource}({key})': {
        parameters: [
          { name: 'resource', in: 'path', required: true, schema: { type: 'string', enum: RESOURCES } },
          {
            name: 'key',
            in: 'path',
            required: true,
            description: "The key literal: 'KEY' (quotes doubled inside) or Name='KEY'; EntityEvent: a number.",
            schema: { type: 'string' },
          },
        ],
        get: {
          tags: ['data'],
          summary: 'One record by key.',
          parameters: [collectionOptions[1], collectionOptions[6], collectionOptions[8], collectionOptions[9], ...dataHeaders],
          responses: { '200': { ...json(anyObject, 'The record.'), headers: OK_HEADERS }, ...CONDITIONAL, ...DATA_ERRORS, '404': errorRef('NotFound') },
        },
        delete: {
          tags: ['data'],
          summary: 'Admin accounts: remove a record of their sources.',
          responses: { '204': { description: 'Removed.' }, ...DATA_ERRORS, '404': errorRef('NotFound'), '405': errorRef('MethodNotAllowed') },
        },
      },
      '/v1/listings/data/Property({key})/{navigation}': {
        parameters: [
          { name: 'key', in: 'path', required: true, schema: { type: 'string' } },
          {
            name: 'navigation',
            in: 'path',
            required: true,
            description: 'Media, OpenHouse, PropertyChange, PreferredMedia (collections) or ListAgent, ListOffice, ... (one record).',
            schema: { type: 'string' },
          },
        ],
        get: {
          tags: ['data'],
          summary: "A listing's children as a collection, or its agent or office.",
          parameters: [...collectionOptions, ...dataHeaders],
          responses: {
            '200': { ...json({ oneOf: [ref('Envelope'), anyObject] }, 'The children, or the one record.'), headers: OK_HEADERS },
            '204': { description: 'The listing names no such record the account sees.' },
            ...CONDITIONAL,
            ...DATA_ERRORS,
            '404': errorRef('NotFound'),
          },
        },
      },
      '/v1/listings/data/$changes': {
        post: {
          tags: ['data'],
          summary: 'Admin accounts: several upserts and removals as one change.',
          requestBody: {
            required: true,
            content: {
              'application/json': { schema: { type: 'object', required: ['operations'], properties: { operations: { type: 'array', items: anyObject } } } },
            },
          },
          responses: { '200': json(ref('ChangeSummary'), 'Applied.'), ...DATA_ERRORS, '404': errorRef('NotFound'), '413': errorRef('TooLarge') },
        },
      },
      '/v1/listings/explain/{resource}': {
        parameters: [{ name: 'resource', in: 'path', required: true, schema: { type: 'string', enum: RESOURCES } }],
        get: {
          tags: ['data'],
          summary: "The plan the collection query would run with for the account's sources, as text (no row counts).",
          parameters: [...collectionOptions, ...dataHeaders],
          responses: {
            '200': json(
              { type: 'object', required: ['resource', 'plan'], properties: { resource: { type: 'string' }, plan: { type: 'string' } } },
              'The plan.',
            ),
            ...DATA_ERRORS,
            '404': errorRef('NotFound'),
            '501': { description: 'The backend cannot explain (ExplainUnavailable).' },
          },
        },
      },
      '/admin/clock': {
        get: adminOperation('The clock.', null, anyObject),
        post: adminOperation(
          'Set or advance the clock.',
          { type: 'object', properties: { set: { type: 'string' }, advance: { type: ['string', 'number'] } } },
          anyObject,
        ),
      },
      '/admin/reset': {
        post: adminOperation('Back to the data as loaded, or to a checkpoint.', { type: 'object', properties: { checkpoint: { type: 'string' } } }, anyObject),
      },
      '/admin/checkpoint': {
        post: adminOperation(
          'Save the data as it is under a name.',
          { type: 'object', required: ['name'], properties: { name: { type: 'string' } } },
          anyObject,
        ),
      },
      '/admin/faults': {
        get: adminOperation('The fault rules.', null, anyObject),
        put: adminOperation('Replace the fault rules.', anyObject, anyObject),
        post: adminOperation('Add fault rules.', anyObject, anyObject),
        delete: adminOperation('Remove every fault rule.', null, anyObject),
      },
      '/admin/limits': {
        get: adminOperation('The rate and limit profile.', null, anyObject),
        put: adminOperation('Replace the profile.', anyObject, anyObject),
      },
      '/admin/requests': { get: adminOperation('The request journal.', null, anyObject), delete: adminOperation('Clear the journal.', null, anyObject) },
    },
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'An access_token from POST /v1/token.' },
        metricsToken: { type: 'http', scheme: 'bearer', description: 'The token of serve --metrics TOKEN.' },
        adminToken: { type: 'http', scheme: 'bearer', description: 'The token of serve --admin-token TOKEN.' },
      },
      headers: {
        ETag: { description: 'A strong validator of the representation (send it back in If-None-Match).', schema: { type: 'string' } },
        ODataVersion: { description: '4.01, or 4.0 when the request says OData-MaxVersion: 4.0.', schema: { type: 'string', enum: ['4.0', '4.01'] } },
      },
      responses: {
        BadRequest: json(ref('Error'), 'Bad request or query (codes such as InvalidSyntax, UnknownField, InvalidCredentials).'),
        Unauthorized: json(ref('Error'), 'MissingToken or InvalidToken (WWW-Authenticate: Bearer).'),
        Forbidden: json(ref('Error'), 'Forbidden: this client may not use the route.'),
        NotFound: json(ref('Error'), 'NotFound, EntityNotFound, UnknownResource or UnknownNavigationProperty.'),
        MethodNotAllowed: json(ref('Error'), 'MethodNotAllowed (the Allow header lists the methods).'),
        TooLarge: json(ref('Error'), 'PayloadTooLarge (413) or QueryStringTooLong (414).'),
        TooManyRequests: json(ref('Error'), 'TooManyLoginAttempts or RateLimited (Retry-After, seconds).'),
        Unavailable: json(ref('Error'), 'BackendUnavailable: the database cannot answer now (Retry-After).'),
      },
      schemas: {
        Error: {
          type: 'object',
          required: ['error'],
          properties: {
            error: {
              type: 'object',
              required: ['code', 'message'],
              properties: {
                code: { type: 'string', description: 'A stable code.' },
                message: { type: 'string' },
                target: { type: 'string', description: 'The query option at fault.' },
                position: { type: 'integer', description: "0-based offset into the option's decoded value." },
                details: {
                  type: 'array',
                  items: {
                    type: 'object',
                    required: ['code', 'message'],
                    properties: { code: { type: 'string' }, message: { type: 'string' }, target: { type: 'string' } },
                  },
                },
              },
            },
          },
        },
        Token: {
          type: 'object',
          required: ['access_token', 'expires_in', 'type'],
          properties: { access_token: { type: 'string' }, expires_in: { type: 'integer' }, type: { const: 'Bearer' } },
        },
        Envelope: {
          type: 'object',
          required: ['value'],
          properties: {
            '@odata.context': { type: 'string' },
            '@odata.count': { type: 'integer' },
            '@odata.nextLink': { type: 'string' },
            value: { type: 'array', items: anyObject },
          },
        },
        ChangeSummary: {
          type: 'object',
          properties: { generation: { type: 'integer' }, upserted: { type: 'integer' }, removed: { type: 'integer' }, notFound: { type: 'integer' } },
        },
        AccountResources: anyObject,
        Profiles: anyObject,
        Health: { type: 'object', required: ['status'], properties: { status: { const: 'ok' }, uptimeSeconds: { type: 'integer' } } },
        Readiness: {
          type: 'object',
          required: ['status', 'ready', 'backend'],
          properties: {
            status: { type: 'string', enum: ['ready', 'not ready'] },
            ready: { type: 'boolean' },
            reasons: { type: 'array', items: { type: 'string' } },
            backend: { type: 'string', enum: ['memory', 'postgres'] },
            generation: { type: 'integer' },
            listings: { type: 'integer' },
            database: anyObject,
            replication: anyObject,
          },
        },
      },
    },
  };
}

let cached: string | null = null;

/** The OpenAPI document as an object (tests validate it). */
export function openApiDocument(): Json {
  return JSON.parse((cached ??= JSON.stringify(document()))) as Json;
}

/** The answer to GET /v1/openapi.json. */
export function openApiResponse(method: string): ServiceResponse {
  if (method !== 'GET' && method !== 'HEAD') {
    throw new ServiceError('MethodNotAllowed', `${method} is not allowed on /v1/openapi.json; use GET.`, { headers: { Allow: 'GET, HEAD' } });
  }
  cached ??= JSON.stringify(document());
  return textResponse(200, cached, JSON_TYPE);
}
