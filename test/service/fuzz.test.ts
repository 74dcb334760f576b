/**
 * Grammar-driven fuzzing of whole requests through the HTTP handler (in-process Requests): query
 * options generated from the grammar (test/odata/arbitraries.ts) over the data set's real field
 * names, plus well-typed atoms so that many requests get past the binder, sent to the
 * collections, the `$count` segments and fetch by key in both key forms, by an account limited
 * to some sources. Whatever comes back: never a 5xx; every 4xx a well-formed error object with a
 * stable-looking code; every 200 shows only records of the account's sources (expansions too).
 * Fixed seeds, bounded runs.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_DATA_DIR, type Engine } from '../../src/engine.js';
import type { Expr, ParsedQuery } from '../../src/odata/ast.js';
import { parseQuery } from '../../src/odata/parse-query.js';
import { printQueryOptions } from '../../src/odata/printer.js';
import { SEARCH_FIELDS } from '../../src/schema/search-fields.js';
import type { Handler } from '../../src/service/handler.js';
import { grammarOf } from '../odata/arbitraries.js';
import { BASE, call, defaultEngine, login, makeHandler, PARTNER_SOURCES } from './helpers.js';

type Rec = Record<string, unknown>;
type Resource = 'Property' | 'Media' | 'OpenHouse';
const KEY_NAME: Record<Resource, string> = { Property: 'ListingKey', Media: 'MediaKey', OpenHouse: 'OpenHouseKey' };
const read = (file: string): Rec[] =>
  readFileSync(path.join(DEFAULT_DATA_DIR, file), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Rec);

/** The source of every record, by resource and key (a child's is its listing's). */
const sourceOf: Record<Resource | 'PropertyChange', Map<string, string>> = {
  Property: new Map(),
  Media: new Map(),
  OpenHouse: new Map(),
  PropertyChange: new Map(),
};
for (const r of read('Property.jsonl')) sourceOf.Property.set(r.ListingKey as string, r.OriginatingSystemName as string);
for (const m of read('Media.jsonl'))
  if (m.ResourceName === 'Property') sourceOf.Media.set(m.MediaKey as string, sourceOf.Property.get(m.ResourceRecordKey as string)!);
for (const o of read('OpenHouse.jsonl')) sourceOf.OpenHouse.set(o.OpenHouseKey as string, sourceOf.Property.get(o.ListingKey as string)!);
for (const c of read('PropertyChange.jsonl')) sourceOf.PropertyChange.set(c.PropertyChangeKey as string, sourceOf.Property.get(c.ListingKey as string)!);
const CHILD_KEY: Record<string, keyof typeof sourceOf> = { Media: 'Media', PreferredMedia: 'Media', OpenHouse: 'OpenHouse', PropertyChange: 'PropertyChange' };
const CHILD_KEY_NAME: Record<keyof typeof sourceOf, string> = { ...KEY_NAME, PropertyChange: 'PropertyChangeKey' };
const visible = (source: string | undefined): boolean => source !== undefined && PARTNER_SOURCES.includes(source);
const visibleTotal = (r: Resource): number => [...sourceOf[r].values()].filter(visible).length;

let engine: Engine;
let handler: Handler;
let token: string;

beforeAll(async () => {
  engine = await defaultEngine();
  ({ handler } = await makeHandler());
  token = await login(handler, 'partner');
});

/** Well-typed filters over the real fields, so that a good share of requests reach the planner and executor. */
const TYPED = [
  "search.text(KeywordSearchText,'pool') eq true",
  "search.text(RawAddressSearchText,'oak street')",
  "search.text(KeywordSearchText,'granite') ne null",
  'ListPrice gt 500000',
  'BedroomsTotal ge 3',
  "City eq 'Houston'",
  "StandardStatus in ('Active','Pending')",
  'Location ne null',
  'RawLocation eq null',
  "geo.distance(Location, geography'POINT(-95.37 29.76)') le 20000",
  "Appliances/any(a: a eq 'Dishwasher') eq false",
  "contains(PublicRemarks,'view') eq true",
  'PoolPrivateYN eq true',
  "MediaCategory eq 'Photo'",
  'Order le 3',
  'OpenHouseDate ne null',
  "OpenHouseType eq 'Public'",
  'ModificationTimestamp gt 2025-01-01T00:00:00Z',
].map((text): Expr => parseQuery(`$filter=${text}`).filter!);

describe('grammar fuzzing through the HTTP handler', () => {
  it('never a 5xx; every 4xx a coded error object; every 200 only the account’s records', async () => {
    const fields = new Set<string>();
    for (const r of ['Property', 'Media', 'OpenHouse', 'PropertyChange'] as const) for (const f of engine.schemaOf(r).fields) fields.add(f.name);
    const names = fc.constantFrom(...fields, ...SEARCH_FIELDS, 'Media', 'OpenHouse', 'PreferredMedia', 'PropertyChange', 'relevance', 'a', 'x');
    const grammar = grammarOf(
      names,
      TYPED.map((e) => fc.constant(e)),
    );
    const OPTIONS = ['filter', 'select', 'orderby', 'top', 'skip', 'count', 'ignorenulls', 'expand', 'apply', 'format'] as const;
    const query = fc
      .tuple(
        grammar.query,
        fc.subarray([...OPTIONS]),
        fc.record({ top: fc.integer({ min: 0, max: 25 }), skip: fc.integer({ min: 0, max: 40 }) }, { requiredKeys: [] }),
        fc.option(fc.constantFrom(...TYPED), { nil: undefined }),
      )
      .map(([q, keep, paging, typed]): ParsedQuery => {
        const out: Record<string, unknown> = {};
        for (const k of keep) if (q[k] !== undefined) out[k] = q[k];
        return { ...out, ...paging, ...(typed ? { filter: typed } : {}) };
      });
    const keys: Record<Resource, string[]> = { Property: [], Media: [], OpenHouse: [] };
    for (const r of ['Property', 'Media', 'OpenHouse'] as const) {
      const all = [...sourceOf[r].entries()];
      keys[r] = [...all.filter(([, s]) => visible(s)).slice(0, 3), ...all.filter(([, s]) => !visible(s)).slice(0, 3)].map(([k]) => k);
      keys[r].push('nope', "it's", '');
    }
    const target = fc.oneof(
      fc.record({ kind: fc.constant('collection' as const), resource: fc.constantFrom<Resource>('Property', 'Media', 'OpenHouse') }),
      fc.record({ kind: fc.constant('count' as const), resource: fc.constantFrom<Resource>('Property', 'Media', 'OpenHouse') }),
      fc.constantFrom<Resource>('Property', 'Media', 'OpenHouse').chain((resource) =>
        fc.record({
          kind: fc.constant('key' as const),
          resource: fc.constant(resource),
          key: fc.constantFrom(...keys[resource]),
          form: fc.constantFrom('plain', 'named', 'wrong'),
        }),
      ),
    );
    const headers = fc.record(
      { 'OData-MaxVersion': fc.constantFrom('4.0', '4.01', '3.0'), Prefer: fc.constantFrom('odata.maxpagesize=3', 'odata.maxpagesize=0') },
      { requiredKeys: [] },
    );
    const seen = { ok: 0, client: 0, records: 0 };
    await fc.assert(
      fc.asyncProperty(target, query, headers, async (t, parsed, hdrs) => {
        const text = printQueryOptions(t.kind === 'count' && parsed.filter ? { filter: parsed.filter } : parsed)
          .map(([k, v]) => `${k}=${encodeURIComponent(v)}`)
          .join('&');
        let segment: string = t.resource;
        if (t.kind === 'count') segment = `${t.resource}/$count`;
        if (t.kind === 'key') {
          const literal = `'${encodeURIComponent(t.key.replace(/'/g, "''"))}'`;
          segment = `${t.resource}(${t.form === 'plain' ? literal : `${t.form === 'named' ? KEY_NAME[t.resource] : 'Nope'}=${literal}`})`;
        }
        const url = `${BASE}/v1/listings/data/${segment}${text ? `?${text}` : ''}`;
        const c = await call(handler, url, { token, headers: hdrs });
        const where = `${c.status} ${url} ${JSON.stringify(hdrs)}: ${c.text.slice(0, 300)}`;
        expect(c.status, where).toBeLessThan(500);
        expect(c.headers.get('odata-version'), where).toBe(hdrs['OData-MaxVersion'] === '4.01' || hdrs['OData-MaxVersion'] === undefined ? '4.01' : '4.0');
        if (c.status >= 400) {
          seen.client++;
          expect(Object.keys(c.json ?? {}), where).toEqual(['error']);
          const e = c.json.error as Record<string, unknown>;
          expect(e.code, where).toMatch(/^[A-Z][A-Za-z]{3,40}$/);
          expect(typeof e.message === 'string' && e.message.length > 10, where).toBe(true);
          expect(
            Object.keys(e).every((k) => ['code', 'message', 'target', 'position', 'details'].includes(k)),
            where,
          ).toBe(true);
          return;
        }
        expect(c.status, where).toBe(200);
        seen.ok++;
        if (t.kind === 'count') {
          expect(c.text, where).toMatch(/^\d+$/);
          expect(Number(c.text), where).toBeLessThanOrEqual(visibleTotal(t.resource));
          return;
        }
        const records: Rec[] = t.kind === 'key' ? [c.json as Rec] : (c.json.value as Rec[]);
        if (t.kind === 'collection' && c.json['@odata.count'] !== undefined && parsed.apply === undefined) {
          expect(c.json['@odata.count'], where).toBeLessThanOrEqual(visibleTotal(t.resource));
        }
        if (parsed.apply !== undefined) return; // aggregated rows name no record
        for (const r of records) {
          const key = r[KEY_NAME[t.resource]] as string;
          expect(visible(sourceOf[t.resource].get(key)), `${key} in ${where}`).toBe(true);
          seen.records++;
          for (const [nav, child] of Object.entries(CHILD_KEY)) {
            for (const x of (r[nav] as Rec[] | undefined) ?? []) {
              expect(visible(sourceOf[child].get(x[CHILD_KEY_NAME[child]] as string)), `${nav} of ${key} in ${where}`).toBe(true);
            }
          }
        }
      }),
      { seed: 15_2025, numRuns: 5000 },
    );
    // not vacuous: the mix reaches both answers, and 200s carry records
    expect(seen.ok).toBeGreaterThan(300);
    expect(seen.client).toBeGreaterThan(1000);
    expect(seen.records).toBeGreaterThan(600);
  }, 60_000);
});
