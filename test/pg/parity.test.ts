/**
 * The differential suite of the PostgreSQL backend: the same data in both backends, the same
 * queries, identical answers (keys in order, values byte for byte, counts, groups, errors). Only a
 * nextLink's $skiptoken differs by design (a keyset here, a generation pin in memory): links are
 * compared without it, and following them gives the same rows.
 *
 * Every suite runs on each layout of `LAYOUTS` (test/pg/helpers.ts): a single node, the
 * partitioned coordinator over two worker clusters, and Citus when RESO_CITUS_URL is set. On a
 * distributed layout a single node loaded with the same data answers beside it, and the two must
 * be identical to the byte, nextLinks and their $skiptokens included (both are keysets), page by
 * page when the links are followed, and in every count and error message.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_DATA_DIR, Engine } from '../../src/engine.js';
import { QueryError } from '../../src/errors.js';
import type { QueryResult } from '../../src/exec/page.js';
import { generateDataset } from '../../src/generate/dataset.js';
import type { QueryResource } from '../../src/plan/plan.js';
import { PostgresEngine } from '../../src/pg/engine.js';
import type { RecordsInput } from '../../src/store/load.js';
import { fixedFilters } from '../exec/filter-cases.js';
import { freshDatabase, freshLayout, LAYOUTS, pgSkip, type LayoutKind, type TestLayout } from './helpers.js';

type Rec = Record<string, unknown>;
const NOW = Date.parse('2025-06-01T00:00:00Z');
const now = (): Date => new Date(NOW);

/** A result with the $skiptoken taken out of its nextLink. */
function comparable(r: QueryResult): QueryResult {
  const next = r['@odata.nextLink'];
  if (next === undefined) return r;
  return { ...r, '@odata.nextLink': next.replace(/&?%24skiptoken=[^&]*/, '').replace(/&?\$skiptoken=[^&]*/, '') };
}

interface Outcome {
  readonly result?: QueryResult;
  readonly error?: { code: string; option: string | undefined; message?: string };
}

/** What a call gave, comparable with the in-memory engine's (no $skiptoken, no error message). */
async function outcome(run: () => QueryResult | Promise<QueryResult>): Promise<Outcome> {
  try {
    return { result: comparable(await run()) };
  } catch (e) {
    if (!(e instanceof QueryError)) throw e;
    return { error: { code: e.code, option: e.option } };
  }
}

/** What a call gave, all of it: for comparing two PostgreSQL layouts, which must agree to the byte. */
async function exactOutcome(run: () => Promise<QueryResult>): Promise<Outcome> {
  try {
    return { result: await run() };
  } catch (e) {
    if (!(e instanceof QueryError)) throw e;
    return { error: { code: e.code, option: e.option, message: e.message } };
  }
}

/** An exact outcome as `outcome` would have given it. */
function comparableOutcome(o: Outcome): Outcome {
  return o.result !== undefined ? { result: comparable(o.result) } : { error: { code: o.error!.code, option: o.error!.option } };
}

/**
 * Expects a call on the layout under test to answer as the in-memory engine does and, on a
 * distributed layout, exactly as the single node does (each engine asked once).
 */
async function expectAgreement(
  label: string,
  memory: () => QueryResult,
  call: (engine: PostgresEngine) => Promise<QueryResult>,
  pg: PostgresEngine,
  single: PostgresEngine | undefined,
): Promise<void> {
  const got = await exactOutcome(() => call(pg));
  expect(comparableOutcome(got), label).toEqual(await outcome(memory));
  if (single !== undefined) expect(got, `${label} (single node)`).toEqual(await exactOutcome(() => call(single)));
}

/** The query string of a nextLink. */
function nextQuery(r: QueryResult): string | undefined {
  const link = r['@odata.nextLink'];
  return link === undefined ? undefined : decodeURIComponent(link.slice(link.indexOf('?') + 1));
}

/**
 * A PostgreSQL engine over `data` on a fresh layout of `kind`, and on a distributed layout also a
 * single node over the same data (whose answers it must repeat exactly).
 */
async function openLayout(
  kind: LayoutKind,
  prefix: string,
  data: string | RecordsInput,
): Promise<{ layout: TestLayout; pg: PostgresEngine; single?: PostgresEngine }> {
  const layout = await freshLayout(kind, prefix);
  const pg = await PostgresEngine.open({ postgres: { url: layout.url, schema: layout.schema, distribution: layout.distribution }, data, now });
  if (kind === 'single') return { layout, pg };
  const single = await PostgresEngine.open({ postgres: { url: await freshDatabase(prefix) }, data, now });
  return { layout, pg, single };
}

function suite(name: string, data: () => string, queries: () => Array<[QueryResource, string, string[] | undefined]>): void {
  describe.skipIf(pgSkip).each(LAYOUTS)(`${name} (%s)`, (kind) => {
    let memory: Engine;
    let layout: TestLayout | undefined;
    let pg: PostgresEngine;
    /** The single node beside a distributed layout (undefined on the single layout itself). */
    let single: PostgresEngine | undefined;
    beforeAll(async () => {
      memory = await Engine.open({ data: data(), now });
      ({ layout, pg, single } = await openLayout(kind, 'parity', data()));
    }, 300_000);
    afterAll(async () => {
      await pg?.close();
      await single?.close();
      await layout?.release();
    });

    it('answers every query of the corpus as the in-memory engine does (and as a single node, to the byte)', async () => {
      const list = queries();
      expect(list.length).toBeGreaterThan(100);
      for (const [resource, q, sources] of list) {
        await expectAgreement(
          `${resource}?${q} as ${sources?.join(',') ?? 'all'}`,
          () => memory.query(resource, q, { sources }),
          (engine) => engine.query(resource, q, { sources }),
          pg,
          single,
        );
      }
    });

    it('pages to the same rows by following nextLinks', async () => {
      for (const q of [
        '$orderby=ListPrice desc',
        '$orderby=City,YearBuilt desc&$top=37',
        "$filter=StandardStatus eq 'Active'&$orderby=ModificationTimestamp",
      ]) {
        const all = memory.query('Property', `${q}${q.includes('$top') ? '' : '&$top=50000'}`).value;
        const seen: unknown[] = [];
        let next: string | undefined = q;
        let pages = 0;
        while (next !== undefined) {
          const r: QueryResult = await pg.query('Property', next, { maxPageSize: 7 });
          // the single node's page for the same link: the same rows and the same next link, $skiptoken included
          if (single !== undefined) expect(r, `${q}: page ${pages + 1} (single node)`).toEqual(await single.query('Property', next, { maxPageSize: 7 }));
          seen.push(...r.value);
          next = nextQuery(r);
          if (++pages > 10_000) throw new Error('paging does not end');
        }
        expect(seen, q).toEqual(all);
      }
    });

    it('reads entities, navigation paths and counts as the in-memory engine does', async () => {
      const keys = memory.keys('Property').slice(0, 40);
      for (const key of keys) {
        for (const q of ['', '$select=ListPrice,City', '$expand=Media($top=2),ListAgent,ListOffice', '$ignorenulls=true']) {
          expect(await pg.entity('Property', key, q), `${key} ${q}`).toEqual(memory.entity('Property', key, q));
          expect(await pg.entity('Property', key, q, { sources: ['CRMLS'] }), `${key} ${q} CRMLS`).toEqual(
            memory.entity('Property', key, q, { sources: ['CRMLS'] }),
          );
        }
        for (const nav of ['Media', 'OpenHouse', 'PropertyChange', 'PreferredMedia']) {
          for (const q of ['', '$top=3&$skip=1&$count=true', '$orderby=ModificationTimestamp desc&$select=ModificationTimestamp']) {
            await expectAgreement(
              `${key}/${nav}?${q}`,
              () => memory.navigate('Property', key, nav, q),
              (engine) => engine.navigate('Property', key, nav, q),
              pg,
              single,
            );
          }
        }
        for (const nav of ['ListAgent', 'ListOffice', 'BuyerAgent']) {
          expect(await pg.navigateOne('Property', key, nav, ''), `${key}/${nav}`).toEqual(memory.navigateOne('Property', key, nav, ''));
        }
      }
      for (const f of ["StandardStatus eq 'Active'", 'ListPrice gt 500000', 'YearBuilt eq null', "search.text(KeywordSearchText,'pool')"]) {
        for (const sources of [undefined, ['CRMLS'], []]) {
          const label = `${f} as ${sources?.join(',') ?? 'all'}`;
          const want = memory.count('Property', `$filter=${f}`, { sources });
          expect(await pg.count('Property', `$filter=${f}`, { sources }), label).toBe(want);
          if (single !== undefined) expect(await single.count('Property', `$filter=${f}`, { sources }), `${label} (single node)`).toBe(want);
        }
      }
      for (const resource of ['Media', 'OpenHouse', 'Member', 'Office', 'EntityEvent'] as const) {
        expect(await pg.count(resource, ''), resource).toBe(memory.count(resource, ''));
      }
      expect(await pg.keys('Property')).toEqual(memory.keys('Property'));
      expect(await pg.keys('Media')).toEqual(memory.keys('Media'));
    });

    it('agrees on generated filters and orders (fast-check)', async () => {
      const props = readRecords(data());
      const rec = fc.nat(props.length - 1).map((i) => props[i]);
      const cmp = fc.constantFrom('lt', 'le', 'gt', 'ge', 'eq', 'ne');
      const quote = (s: string): string => `'${s.replace(/'/g, "''")}'`;
      const atom: fc.Arbitrary<string> = fc.oneof(
        fc.tuple(cmp, rec).map(([op, r]) => `ListPrice ${op} ${String(r.ListPrice ?? 'null')}`),
        fc.tuple(cmp, fc.constantFrom('null', '0', '2', '3', '4')).map(([op, v]) => `BedroomsTotal ${op} ${v}`),
        fc.tuple(cmp, rec).map(([op, r]) => `City ${op} ${typeof r.City === 'string' ? quote(r.City) : 'null'}`),
        fc.tuple(cmp, fc.constantFrom('2024-01-01', '2024-06-30', '2025-03-15', 'null')).map(([op, d]) => `ListingContractDate ${op} ${d}`),
        fc.tuple(cmp, fc.constantFrom('2025-01-01T00:00:00Z', '2025-05-20T12:30:00.5+02:00')).map(([op, d]) => `ModificationTimestamp ${op} ${d}`),
        fc.constantFrom('PoolPrivateYN', 'not PoolPrivateYN', 'PoolPrivateYN eq null'),
        fc.tuple(cmp, fc.integer({ min: 0, max: 400 })).map(([op, n]) => `DaysOnMarket ${op} ${n}`),
        fc.tuple(fc.constantFrom('any', 'all'), fc.constantFrom('Dishwasher', 'Oven', 'Range')).map(([l, v]) => `Appliances/${l}(a: a eq '${v}')`),
        fc.tuple(fc.integer({ min: 500, max: 20000 }), rec).map(([m, r]) => {
          const c = (r.Longitude ?? -100) as number;
          const l = (r.Latitude ?? 40) as number;
          return `geo.distance(Location, geography'POINT(${c} ${l})') le ${m}`;
        }),
        fc.tuple(cmp, fc.integer({ min: 1, max: 9 })).map(([op, n]) => `LivingArea div BedroomsTotal ${op} ${n * 150}`),
        fc.tuple(fc.constantFrom('contains', 'startswith', 'endswith'), fc.constantFrom('a', 'e', 'St', 'Ave', 'ville')).map(([f, s]) => `${f}(City,'${s}')`),
      );
      const filter: fc.Arbitrary<string> = fc.letrec<{ f: string }>((tie) => ({
        f: fc.oneof(
          { depthSize: 'small', withCrossShrink: true },
          atom,
          fc.tuple(tie('f'), fc.constantFrom('and', 'or'), tie('f')).map(([a, op, b]) => `(${a} ${op} ${b})`),
          tie('f').map((a) => `not (${a})`),
        ),
      })).f;
      const order = fc.constantFrom(
        '',
        'ListPrice desc',
        'City,ListPrice',
        'YearBuilt desc,BedroomsTotal',
        'ModificationTimestamp',
        'DaysOnMarket desc',
        'PoolPrivateYN,City desc',
      );
      await fc.assert(
        fc.asyncProperty(filter, order, fc.integer({ min: 0, max: 30 }), fc.boolean(), async (f, o, skip, count) => {
          const q = `$filter=${f}${o ? `&$orderby=${o}` : ''}&$skip=${skip}&$top=25&$select=ListingKey,ListPrice,City${count ? '&$count=true' : ''}`;
          await expectAgreement(
            q,
            () => memory.query('Property', q),
            (engine) => engine.query('Property', q),
            pg,
            single,
          );
        }),
        { numRuns: 150, seed: 1601 },
      );
    });
  });
}

function readRecords(dir: string): Rec[] {
  return readFileSync(path.join(dir, 'Property.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Rec);
}

/** The corpus: every fixed filter with orders and pages, every option, every resource, several callers. */
function corpus(dir: string): Array<[QueryResource, string, string[] | undefined]> {
  const records = readRecords(dir);
  const out: Array<[QueryResource, string, string[] | undefined]> = [];
  const add = (resource: QueryResource, q: string, sources?: string[]): void => {
    out.push([resource, q, sources]);
  };
  for (const f of fixedFilters(records)) {
    add('Property', `$filter=${f}&$select=ListingKey&$top=50000`);
    add('Property', `$filter=${f}&$orderby=ListPrice desc,City&$skip=3&$top=40&$select=ListingKey,ListPrice,City`);
    add('Property', `$filter=${f}&$count=true&$orderby=ModificationTimestamp&$top=15`);
    add('Property', `$filter=${f}&$count=true&$top=0`, ['CRMLS']);
  }
  for (const q of [
    '',
    '$top=5',
    '$select=*&$top=3',
    '$select=ListPrice,City,Location&$top=20&$skip=40',
    '$orderby=ListPrice desc&$top=30',
    '$orderby=City desc,ListPrice&$top=30&$count=true',
    '$orderby=CloseDate,ListingContractDate desc&$top=30',
    '$orderby=PoolPrivateYN desc,YearBuilt&$top=30',
    '$orderby=DaysOnMarket desc&$top=30',
    '$orderby=ListPrice sub OriginalListPrice&$top=30',
    '$orderby=tolower(City),length(UnparsedAddress) desc&$top=30',
    '$ignorenulls=true&$top=10',
    '$count=true&$top=0',
    '$count=true',
    "$filter=search.text(KeywordSearchText,'pool granite')&$orderby=relevance desc&$top=50&$select=ListingKey",
    "$filter=search.text(RawAddressSearchText,'maple st')&$orderby=relevance desc,ListPrice&$top=50&$count=true&$select=ListingKey",
    "$filter=search.text(RawAddressSearchText,'main stre')&$orderby=relevance desc&$top=50&$select=ListingKey",
    // rows the search does not match score 0 (its scores are an outer join)
    "$filter=search.text(RawAddressSearchText,'main stre') or ListPrice lt 300000&$orderby=relevance desc&$top=50&$select=ListingKey",
    "$filter=not search.text(RawAddressSearchText,'oak av') and (search.text(RawAddressSearchText,'washingtn') or BedroomsTotal eq 2)&$orderby=relevance desc,ListPrice&$top=40&$select=ListingKey",
    "$filter=search.text(KeywordSearchText,'pool') or search.text(KeywordSearchText,'spa')&$orderby=relevance desc&$top=50&$select=ListingKey",
    '$expand=Media&$top=5',
    '$expand=Media($select=MediaKey,Order;$filter=Order le 3;$orderby=Order desc;$top=2;$skip=1),OpenHouse,PropertyChange($top=1)&$top=8',
    '$expand=PreferredMedia,ListAgent($select=MemberFullName),ListOffice,BuyerAgent,CoListOffice&$top=10&$select=ListingKey',
    '$expand=Media($orderby=MediaCategory,ModificationTimestamp desc)&$ignorenulls=true&$top=4',
    '$apply=groupby((StandardStatus))',
    '$apply=groupby((City),aggregate($count as n,ListPrice with average as avg,ListPrice with median as med))&$orderby=n desc&$top=10&$count=true',
    '$apply=groupby((PropertyType,BedroomsTotal),aggregate(ListPrice with max as hi,ListPrice with min as lo,LivingArea with sum as area))',
    '$apply=aggregate(ListPrice with p90 as p90,ModificationTimestamp with max as last,ListingContractDate with min as first,City with countdistinct as cities)',
    '$apply=filter(ListPrice gt 300000)/groupby((PoolPrivateYN),aggregate(DaysOnMarket with p25 as q))&$select=q',
    '$apply=groupby((YearBuilt))&$orderby=YearBuilt desc&$skip=3&$top=7',
    '$filter=Foo eq 1',
    '$orderby=relevance desc',
    "$filter=ListPrice eq 'x'",
    '$top=60000',
    '$expand=Nope',
    "$filter=search.text(KeywordSearchText,'')",
    "$filter=geo.distance(Location, geography'POINT(0 0)') gt 5",
  ]) {
    add('Property', q);
    add('Property', q, ['CRMLS']);
    add('Property', q, []);
  }
  for (const [resource, qs] of [
    [
      'Media',
      [
        '',
        '$orderby=Order desc,MediaKey&$top=40',
        "$filter=MediaCategory eq 'Photo'&$count=true&$top=5",
        '$apply=groupby((MediaCategory),aggregate($count as n))',
      ],
    ],
    ['OpenHouse', ['', '$orderby=OpenHouseStartTime desc&$top=20', '$filter=OpenHouseDate ge 2025-01-01&$count=true']],
    ['Member', ['', '$orderby=MemberLastName&$top=20&$count=true', "$filter=startswith(MemberFirstName,'J')"]],
    ['Office', ['', '$orderby=OfficeName desc&$top=20', '$count=true&$top=0']],
    ['Lookup', ['$top=30', "$filter=LookupName eq 'StandardStatus'&$count=true", '$orderby=LookupValue desc&$top=10']],
    ['EntityEvent', ['$top=20', '$orderby=EntityEventSequence desc&$top=5&$count=true', "$filter=ResourceName eq 'Media'&$top=10"]],
  ] as const) {
    for (const q of qs) {
      add(resource, q);
      add(resource, q, ['CRMLS']);
    }
  }
  return out;
}

suite(
  'parity on the default data set',
  () => DEFAULT_DATA_DIR,
  () => corpus(DEFAULT_DATA_DIR),
);

let generated = '';
suite(
  'parity on a generated data set',
  () => {
    if (generated === '') {
      generated = mkdtempSync(path.join(os.tmpdir(), 'reso-parity-'));
      generateDataset({ listings: 1500, seed: 'parity', outDir: generated });
    }
    return generated;
  },
  () => corpus(generated),
);
afterAll(() => {
  if (generated !== '') rmSync(generated, { recursive: true, force: true });
});

describe.skipIf(pgSkip).each(LAYOUTS)('parity where code point and UTF-16 order differ (%s)', (kind) => {
  // keys and cities mixing U+E000..U+FFFF with supplementary characters: PostgreSQL's COLLATE "C"
  // alone orders them by code point, the in-memory engine by UTF-16 code unit
  const tails = ['\uFFFD', '\u{1F600}', '\uE000x', 'a', '\u{10FFFF}', 'Z', '\uFF21', '\u{20000}b'];
  const records = {
    Property: tails.flatMap((t, i) =>
      ['', 'q'].map((suffix, j) => ({
        ListingKey: `K${t}${suffix}`,
        OriginatingSystemName: j === 0 ? 'A' : 'B',
        City: `C${tails[(i + 3) % tails.length]}`,
        ListPrice: 100 + (i % 3),
      })),
    ),
    Media: tails.map((t, i) => ({ MediaKey: `M${t}`, ResourceName: 'Property', ResourceRecordKey: `K${tails[i % 2]}`, Order: i % 2 })),
  };
  let memory: Engine;
  let layout: TestLayout | undefined;
  let pg: PostgresEngine;
  let single: PostgresEngine | undefined;
  beforeAll(async () => {
    memory = await Engine.open({ data: records, now });
    ({ layout, pg, single } = await openLayout(kind, 'utf16', records));
  }, 120_000);
  afterAll(async () => {
    await pg?.close();
    await single?.close();
    await layout?.release();
  });

  it('orders keys and strings, and pages, in UTF-16 order', async () => {
    for (const q of [
      '',
      '$orderby=City',
      '$orderby=City desc,ListPrice',
      '$orderby=ListPrice',
      "$filter=City gt 'C\uFFFD'",
      '$expand=Media',
      '$count=true&$top=3&$skip=2',
    ]) {
      const got = await pg.query('Property', q, { maxPageSize: 5 });
      expect(comparable(got), q).toEqual(comparable(memory.query('Property', q, { maxPageSize: 5 })));
      if (single !== undefined) expect(got, `${q} (single node)`).toEqual(await single.query('Property', q, { maxPageSize: 5 }));
    }
    for (const q of ['$orderby=City', '']) {
      const all = memory.query('Property', `${q}&$top=100`).value;
      const seen: unknown[] = [];
      let next: string | undefined = q;
      while (next !== undefined) {
        const r: QueryResult = await pg.query('Property', next, { maxPageSize: 3 });
        if (single !== undefined) expect(r, `${q}: ${next} (single node)`).toEqual(await single.query('Property', next, { maxPageSize: 3 }));
        seen.push(...r.value);
        next = nextQuery(r);
      }
      expect(seen, q).toEqual(all);
    }
  });
});
