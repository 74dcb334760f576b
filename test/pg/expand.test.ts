/**
 * $expand and navigation paths on PostgreSQL (src/pg/expand.ts) against the in-memory engine on
 * the same data: the default data set, a generated one, and the hand-made record sets of
 * test/exec/expand.test.ts and test/exec/roster.test.ts (nulls, ties, time zones, PreferredMedia's
 * rules, Member and Office of other sources), each loaded with loadIntoPostgres into its own
 * PostgreSQL schema. For many `$expand` values, pages and sources lists, the page's records with
 * their expansions equal the engine's byte for byte (JSON text), with at most one statement per
 * navigation property per page; childrenScope gives what `engine.navigate` gives.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Engine, type EngineOpenOptions } from '../../src/engine.js';
import { generateDataset } from '../../src/generate/dataset.js';
import type { BoundExpansion } from '../../src/plan/bind-expand.js';
import type { Plan } from '../../src/plan/plan.js';
import { PROPERTY_REFERENCES } from '../../src/schema/catalog.js';
import type { ResourceName } from '../../src/schema/types.js';
import type { JsonValue } from '../../src/store/columns.js';
import { childrenScope, expandPage, orderItems, referenceFields, type ChildNavigation, type ExpandContext } from '../../src/pg/expand.js';
import { compileFilter } from '../../src/pg/filter.js';
import { column, Layout } from '../../src/pg/layout.js';
import { loadIntoPostgres } from '../../src/pg/load.js';
import { recordReader } from '../../src/pg/records.js';
import { Params, type ArrayQueryable } from '../../src/pg/sql.js';
import { handMadeData, keysOf, listing, media, preferredMediaData } from '../exec/expand-data.js';
import { freshDatabase, pgSkip } from './helpers.js';

type Rec = Record<string, JsonValue>;
const NOW = Date.parse('2025-06-01T00:00:00Z');
const clock = (): Date => new Date(NOW);
const NAVS: readonly ChildNavigation[] = ['Media', 'OpenHouse', 'PropertyChange', 'PreferredMedia'];
const REFERENCES = PROPERTY_REFERENCES.map((r) => r.name);

/** A pool that keeps the text of every statement it runs (to count them). */
function counting(pool: pg.Pool): { readonly db: ArrayQueryable; readonly texts: string[] } {
  const texts: string[] = [];
  const query = ((first: string | { text: string }, ...rest: unknown[]) => {
    texts.push(typeof first === 'string' ? first : first.text);
    return (pool.query as (...args: unknown[]) => unknown).call(pool, first, ...rest);
  }) as ArrayQueryable['query'];
  return { db: { query }, texts };
}

/** One data set: the in-memory engine and the same data in a PostgreSQL schema. */
interface Fixture {
  readonly engine: Engine;
  readonly layout: Layout;
}

let pool: pg.Pool;
const tmpDirs: string[] = [];

beforeAll(async () => {
  if (pgSkip) return;
  pool = new pg.Pool({ connectionString: await freshDatabase('expand'), max: 4 });
});
afterAll(async () => {
  await pool?.end();
  for (const d of tmpDirs) rmSync(d, { recursive: true, force: true });
});

async function fixture(schema: string, data?: EngineOpenOptions['data']): Promise<Fixture> {
  const engine = await Engine.open({ now: clock, ...(data === undefined ? {} : { data }) });
  const layout = new Layout(schema);
  await loadIntoPostgres(pool, layout, engine.store);
  return { engine, layout };
}

const planOf = (f: Fixture, q: string, sources?: readonly string[]): Plan => f.engine.explain('Property', q, { format: 'json', sources });

/** The reference key fields of these listings, read from PostgreSQL (what the caller's page statement selects). */
async function parentsOf(f: Fixture, keys: readonly string[], fields: readonly string[]): Promise<Array<{ key: string; refs: Record<string, string | null> }>> {
  const cols = ['ListingKey', ...fields].map((n) => `p.${column({ name: n })}`).join(', ');
  const res = await pool.query({
    text: `SELECT ${cols} FROM ${f.layout.table('Property')} AS p WHERE p."ListingKey" = ANY($1::text[])`,
    values: [keys],
    rowMode: 'array',
  });
  const byKey = new Map((res.rows as unknown[][]).map((r) => [r[0] as string, r]));
  return keys.map((key) => {
    const row = byKey.get(key);
    expect(row, key).toBeDefined();
    return { key, refs: Object.fromEntries(fields.map((n, i) => [n, (row![i + 1] as string | null) ?? null])) };
  });
}

const contextOf = (f: Fixture, db: ArrayQueryable, plan: Plan, sources: readonly string[] | undefined): ExpandContext => ({
  db,
  layout: f.layout,
  schemaOf: (r: ResourceName) => f.engine.schemaOf(r),
  nowMs: NOW,
  ignoreNulls: plan.ignoreNulls,
  sources,
});

/**
 * The page of `q` (a Property query with $expand) from the engine, and the same records made from
 * PostgreSQL: the engine's listing fields followed by expandPage's expansions. Returns both as
 * JSON text per record, and the statements run.
 */
async function comparePage(
  f: Fixture,
  q: string,
  sources?: readonly string[],
): Promise<{ want: string[]; got: string[]; statements: string[]; records: Rec[] }> {
  const plan = planOf(f, q, sources);
  const expansions: readonly BoundExpansion[] = plan.expand ?? [];
  const names = new Set(expansions.map((e) => e.name as string));
  const records = f.engine.query('Property', q, { sources }).value as Rec[];
  const property = f.engine.schemaOf('Property');
  const parents = await parentsOf(
    f,
    records.map((r) => r.ListingKey as string),
    referenceFields(expansions, property),
  );
  const { db, texts } = counting(pool);
  const expanded = await expandPage(expansions, parents, contextOf(f, db, plan, sources));
  const got = records.map((r, i) => {
    const own = Object.fromEntries(Object.entries(r).filter(([k]) => !names.has(k)));
    return JSON.stringify({ ...own, ...expanded[i] });
  });
  return { want: records.map((r) => JSON.stringify(r)), got, statements: texts, records };
}

async function expectSamePage(f: Fixture, q: string, sources?: readonly string[]): Promise<Rec[]> {
  const { want, got, statements, records } = await comparePage(f, q, sources);
  for (let i = 0; i < want.length; i++) expect(got[i], `${q} ${String(sources)} #${i}`).toBe(want[i]);
  const navigations = planOf(f, q, sources).expand?.length ?? 0;
  expect(statements.length, q).toBeLessThanOrEqual(navigations);
  return records;
}

const arrays = (records: readonly Rec[], name: string): Rec[][] => records.map((r) => r[name] as Rec[]);

// ---------------------------------------------------------------------------------------------
// The default data set (generated: 2,000 listings, 35k Media, OpenHouse, PropertyChange, roster)
// ---------------------------------------------------------------------------------------------

/** $expand values of test/exec/expand.test.ts and navigate.test.ts, and more nested filters and orders. */
const EXPANDS: readonly string[] = [
  'Media,OpenHouse,PropertyChange,PreferredMedia',
  "Media($select=MediaKey,Order,MediaCategory,ImageWidth;$filter=MediaCategory eq 'Photo' and Order le 10;$orderby=ImageWidth desc,Order;$skip=1;$top=4)",
  "OpenHouse($select=OpenHouseType,OpenHouseStartTime;$orderby=OpenHouseType desc),PropertyChange($filter=FieldName eq 'ListPrice' or ChangeType eq 'Pending';$orderby=ModificationTimestamp;$top=3),Media($orderby=MediaCategory,ImageHeight desc;$select=MediaCategory,ImageHeight;$top=6)",
  'PreferredMedia($filter=ImageWidth ge 2000;$select=Order,PreferredPhotoYN)',
  'PreferredMedia($orderby=Order desc;$top=1),Media($skip=2;$top=3;$select=Order),PropertyChange($skip=1),OpenHouse($filter=OpenHouseStartTime gt now())',
  'PreferredMedia($skip=1)',
  'Media($filter=ImageWidth ge 1024;$select=MediaURL)',
  "Media($filter=contains(MediaURL,'/1') or endswith(MediaURL,'3.jpg');$orderby=length(MediaURL) desc,ImageWidth;$select=MediaURL)",
  "Media($filter=not (MediaCategory in ('Photo','Video')) and ModificationTimestamp lt 2024-06-01T00:00:00Z;$orderby=ModificationTimestamp desc)",
  'Media($filter=ImageWidth div 3 mod 7 eq 1 or ImageHeight sub ImageWidth gt -500;$orderby=ImageWidth mul 2 add ImageHeight)',
  'OpenHouse($filter=year(OpenHouseDate) eq 2025 and month(OpenHouseStartTime) ge 6;$orderby=OpenHouseEndTime desc;$select=OpenHouseDate,OpenHouseEndTime),PropertyChange($filter=PreviousValue eq null;$top=1)',
  "PropertyChange($orderby=FieldName,NewValue desc),OpenHouse($filter=tolower(OpenHouseStatus) eq 'active' or OpenHouseType ne 'Public')",
  'Media($top=0),PreferredMedia($top=0),OpenHouse($skip=1000),PropertyChange($top=50000)',
  `${REFERENCES.join(',')}`,
  "ListAgent($select=MemberFullName,OfficeKey),ListOffice($filter=OfficeCity eq 'Seattle'),BuyerAgent($filter=MemberStatus eq 'Active' and startswith(MemberLastName,'M')),CoListOffice($select=OfficeName)",
  `Media($top=2),${REFERENCES.slice(0, 4).join(',')},PreferredMedia`,
];

const SOURCES: ReadonlyArray<readonly string[] | undefined> = [undefined, ['CRMLS', 'NWMLS', 'ARMLS', 'HAR'], ['HAR', 'MRED'], ['Nowhere'], []];

describe.skipIf(pgSkip)('expandPage on the default data set', () => {
  let f: Fixture;
  beforeAll(async () => {
    f = await fixture('dflt');
  }, 120_000);

  for (const expand of EXPANDS) {
    it(`$expand=${expand}`, async () => {
      let compared = 0;
      for (const [skip, top] of [
        [0, 300],
        [700, 250],
        [1800, 200],
      ] as const) {
        const records = await expectSamePage(f, `$select=ListingKey&$top=${top}&$skip=${skip}&$expand=${expand}`);
        compared += records.length;
      }
      expect(compared).toBe(750);
    });
  }

  it('$ignorenulls=true inside expansions, listing fields of the full record, other page orders', async () => {
    await expectSamePage(f, '$select=ListingKey&$top=300&$ignorenulls=true&$expand=Media,PropertyChange,PreferredMedia($skip=1),ListAgent,BuyerOffice');
    await expectSamePage(
      f,
      "$filter=StandardStatus eq 'Active'&$orderby=ListPrice desc&$top=25&$skip=5&$select=ListingKey,ListPrice&$expand=PreferredMedia($select=MediaURL),Media($top=2)",
    );
    await expectSamePage(f, '$top=40&$skip=100&$expand=OpenHouse,ListOffice($select=OfficeName)&$ignorenulls=true');
    await expectSamePage(f, '$top=40&$select=ListingKey,ListAgentKey,Media&$expand=PreferredMedia');
  });

  it('every account: only the Member and Office records of its sources, children of its listings', async () => {
    for (const sources of SOURCES) {
      const q = `$select=ListingKey&$top=2000&$expand=${REFERENCES.join(',')},PreferredMedia($select=MediaKey),OpenHouse($select=ListingKey)`;
      const records = await expectSamePage(f, q, sources);
      if (sources === undefined) expect(records).toHaveLength(2000);
      if (sources?.length === 0 || sources?.[0] === 'Nowhere') expect(records).toEqual([]);
    }
    // listings of all sources, Member and Office of some: references to other sources are null
    const plan = planOf(f, `$select=ListingKey&$expand=${REFERENCES.join(',')}&$top=500`);
    const keys = (f.engine.query('Property', '$select=ListingKey&$top=500').value as Rec[]).map((r) => r.ListingKey as string);
    const parents = await parentsOf(f, keys, referenceFields(plan.expand!));
    const pgFor = async (sources: readonly string[] | undefined) => expandPage(plan.expand!, parents, contextOf(f, pool, plan, sources));
    const all = await pgFor(undefined);
    const har = await pgFor(['HAR']);
    let hidden = 0;
    for (let i = 0; i < keys.length; i++) {
      for (const name of REFERENCES) {
        const rec = all[i][name] as Rec | null;
        const want = rec !== null && rec.OriginatingSystemName === 'HAR' ? rec : null;
        expect(har[i][name], `${keys[i]} ${name}`).toEqual(want);
        if (rec !== null && want === null) hidden++;
      }
    }
    expect(hidden).toBeGreaterThan(100);
    expect((await pgFor([])).every((r) => REFERENCES.every((n) => r[n] === null))).toBe(true);
  });

  it('the comparison is not vacuous', async () => {
    const { records } = await comparePage(
      f,
      `$select=ListingKey&$top=2000&$expand=OpenHouse($select=OpenHouseKey),PreferredMedia($select=PreferredPhotoYN),ListAgent,BuyerAgent`,
    );
    expect(arrays(records, 'OpenHouse').filter((a) => a.length >= 2).length).toBeGreaterThan(10);
    expect(arrays(records, 'PreferredMedia').filter((a) => a[0]?.PreferredPhotoYN === true).length).toBeGreaterThan(100);
    expect(arrays(records, 'PreferredMedia').filter((a) => a.length === 2 && a[0].PreferredPhotoYN !== true).length).toBeGreaterThan(100);
    expect(arrays(records, 'PreferredMedia').filter((a) => a.length === 0).length).toBeGreaterThan(0);
    expect(records.filter((r) => r.ListAgent !== null).length).toBeGreaterThan(1000);
    expect(records.filter((r) => r.BuyerAgent === null).length).toBeGreaterThan(100);
  });

  it('one statement per navigation property, whatever the page size; none for an empty page or $top=0', async () => {
    const q = `$select=ListingKey&$top=1000&$expand=Media,OpenHouse,PropertyChange,PreferredMedia,${REFERENCES.join(',')}`;
    const { statements } = await comparePage(f, q);
    expect(statements).toHaveLength(4 + REFERENCES.length);
    const plan = planOf(f, q);
    const { db, texts } = counting(pool);
    expect(await expandPage(plan.expand!, [], contextOf(f, db, plan, undefined))).toEqual([]);
    const none = planOf(f, '$expand=Media($top=0),OpenHouse($top=0)');
    expect(await expandPage(none.expand!, [{ key: 'P000000001', refs: {} }], contextOf(f, db, none, undefined))).toEqual([{ Media: [], OpenHouse: [] }]);
    expect(texts).toEqual([]);
  });

  it('statements depend on the query shape only: literals and keys are bind parameters', async () => {
    const texts = async (q: string, keys: string[]): Promise<string[]> => {
      const plan = planOf(f, q);
      const { db, texts: run } = counting(pool);
      await expandPage(
        plan.expand!,
        keys.map((key) => ({ key, refs: { ListAgentKey: `${key}'--` } })),
        contextOf(f, db, plan, ['A', "B'); DROP TABLE x; --"]),
      );
      return run;
    };
    const a = await texts("$expand=Media($filter=MediaCategory eq 'Photo';$top=3;$skip=1),ListAgent($filter=MemberLastName eq 'x')", ['P000000001']);
    const b = await texts("$expand=Media($filter=MediaCategory eq 'O''Brien'' ; DROP';$top=7;$skip=0),ListAgent($filter=MemberLastName eq 'y''')", [
      "K'); DROP TABLE reso.Media; --",
      'P000000002',
    ]);
    expect(a).toHaveLength(2);
    expect(b).toEqual(a);
    for (const t of a) expect(t).not.toMatch(/'Photo'|P000000001|DROP/);
  });

  it('listings that are not in the table, or name no record, get empty arrays and nulls', async () => {
    const plan = planOf(f, '$expand=Media,PreferredMedia,ListAgent,ListOffice');
    const got = await expandPage(
      plan.expand!,
      [
        { key: 'no such listing', refs: { ListAgentKey: 'M-none', ListOfficeKey: null } },
        { key: 'P000000001', refs: {} },
      ],
      contextOf(f, pool, plan, undefined),
    );
    expect(got[0]).toEqual({ Media: [], PreferredMedia: [], ListAgent: null, ListOffice: null });
    expect((got[1].Media as Rec[]).length).toBeGreaterThan(0);
    expect([got[1].ListAgent, got[1].ListOffice]).toEqual([null, null]);
  });
});

// ---------------------------------------------------------------------------------------------
// A generated data set of its own
// ---------------------------------------------------------------------------------------------

/** What a generated nested option may name, per navigation property. */
interface NavArbitrary {
  readonly atoms: ReadonlyArray<fc.Arbitrary<string>>;
  /** Sort keys of $orderby (fields and expressions). */
  readonly order: readonly string[];
  readonly select: readonly string[];
  readonly single: boolean;
}

const cmp = fc.constantFrom('lt', 'le', 'gt', 'ge', 'eq', 'ne');
const MEDIA: NavArbitrary = {
  atoms: [
    fc.tuple(cmp, fc.constantFrom('null', '1', '3', '8', '20')).map(([op, v]) => `Order ${op} ${v}`),
    fc.tuple(cmp, fc.constantFrom('null', '640', '1024', '2048')).map(([op, v]) => `ImageWidth ${op} ${v}`),
    fc.constantFrom('Photo', 'Video', 'Floor Plan', 'Document').map((v) => `MediaCategory eq '${v}'`),
    fc.constantFrom('true', 'false', 'null').map((v) => `PreferredPhotoYN eq ${v}`),
    fc.constantFrom(2023, 2024, 2025).map((y) => `year(ModificationTimestamp) eq ${y}`),
    fc.constantFrom('/1', '3.jpg', 'crmls').map((v) => `contains(MediaURL,'${v}')`),
    fc.integer({ min: -500, max: 1500 }).map((n) => `ImageWidth sub ImageHeight gt ${n}`),
    fc.constantFrom('Kitchen', 'Laundry', 'Front of Structure').map((v) => `ImageOf ne '${v}'`),
  ],
  order: [
    'Order',
    'Order desc',
    'ImageWidth desc',
    'ImageHeight',
    'MediaCategory',
    'MediaCategory desc',
    'ModificationTimestamp desc',
    'PreferredPhotoYN desc',
    'length(MediaURL)',
    'ImageOf',
  ],
  select: ['Order', 'MediaCategory', 'ImageWidth', 'MediaURL', 'PreferredPhotoYN', 'ModificationTimestamp', 'ImageOf'],
  single: false,
};
const NAV_ARBITRARIES: Readonly<Record<string, NavArbitrary>> = {
  Media: MEDIA,
  PreferredMedia: MEDIA,
  OpenHouse: {
    atoms: [
      fc.constantFrom('lt', 'gt', 'eq').map((op) => `OpenHouseStartTime ${op} now()`),
      fc.constantFrom('Public', 'Broker').map((v) => `OpenHouseType eq '${v}'`),
      fc.constantFrom('Active', 'Ended', 'Canceled').map((v) => `OpenHouseStatus ne '${v}'`),
      fc.constantFrom('2025-05-30', '2025-06-10').map((d) => `OpenHouseDate ge ${d}`),
      fc.constantFrom(11, 12, 13, 17).map((h) => `hour(OpenHouseStartTime) ge ${h}`),
    ],
    order: ['OpenHouseStartTime desc', 'OpenHouseEndTime', 'OpenHouseType', 'OpenHouseDate desc', 'ShowingAgentLastName'],
    select: ['OpenHouseStartTime', 'OpenHouseDate', 'OpenHouseType', 'ListingKey', 'ShowingAgentFirstName'],
    single: false,
  },
  PropertyChange: {
    atoms: [
      fc.constantFrom('ListPrice', 'StandardStatus').map((v) => `FieldName eq '${v}'`),
      fc.constantFrom('Pending', 'Price Change', 'Closed').map((v) => `ChangeType ne '${v}'`),
      fc.constantFrom('eq', 'ne').map((op) => `PreviousValue ${op} null`),
      fc.constantFrom('2024-01-01T00:00:00Z', '2025-01-01T00:00:00Z').map((t) => `ModificationTimestamp lt ${t}`),
    ],
    order: ['ModificationTimestamp', 'FieldName desc', 'NewValue', 'ChangeType desc'],
    select: ['FieldName', 'NewValue', 'PreviousValue', 'ModificationTimestamp'],
    single: false,
  },
  ListAgent: {
    atoms: [
      fc.constantFrom('M', 'S', 'J').map((v) => `startswith(MemberLastName,'${v}')`),
      fc.constantFrom('Active', 'Inactive').map((v) => `MemberStatus eq '${v}'`),
    ],
    order: [],
    select: ['MemberFullName', 'OfficeKey', 'MemberEmail'],
    single: true,
  },
  BuyerOffice: {
    atoms: [fc.constantFrom('Seattle', 'Houston', 'Tampa').map((v) => `OfficeCity ne '${v}'`)],
    order: [],
    select: ['OfficeName', 'OfficeCity'],
    single: true,
  },
};

function filterOf(atoms: ReadonlyArray<fc.Arbitrary<string>>): fc.Arbitrary<string> {
  const atom = fc.oneof(...atoms);
  return fc.letrec<{ expr: string }>((tie) => ({
    expr: fc.oneof(
      { depthSize: 'small' },
      atom,
      fc.tuple(tie('expr'), tie('expr')).map(([a, b]) => `${a} and ${b}`),
      fc.tuple(tie('expr'), tie('expr')).map(([a, b]) => `(${a} or ${b})`),
      tie('expr').map((a) => `not (${a})`),
    ),
  })).expr;
}

/** One `$expand` item with generated nested options. */
function expandItem(name: string): fc.Arbitrary<string> {
  const a = NAV_ARBITRARIES[name];
  const parts = [
    fc.option(filterOf(a.atoms).map((f) => `$filter=${f}`)),
    fc.option(fc.subarray([...a.select], { minLength: 1 }).map((f) => `$select=${f.join(',')}`)),
    ...(a.single
      ? []
      : [
          fc.option(fc.subarray([...a.order], { minLength: 1, maxLength: 3 }).map((o) => `$orderby=${o.join(',')}`)),
          fc.option(fc.integer({ min: 0, max: 4 }).map((n) => `$skip=${n}`)),
          fc.option(fc.integer({ min: 0, max: 6 }).map((n) => `$top=${n}`)),
        ]),
  ];
  return fc.tuple(...parts).map((opts) => {
    const given = opts.filter((o): o is string => o !== null);
    return given.length ? `${name}(${given.join(';')})` : name;
  });
}

describe.skipIf(pgSkip)('expandPage on another generated data set', () => {
  let f: Fixture;
  beforeAll(async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'reso-pg-expand-'));
    tmpDirs.push(dir);
    generateDataset({ listings: 600, seed: 'pg-expand', outDir: dir });
    f = await fixture('gen', dir);
  }, 120_000);

  it('every navigation property with nested options, for every account', async () => {
    const sources = [undefined, ['CRMLS', 'HAR'], ['Stellar']];
    for (const expand of EXPANDS.slice(0, 6).concat(EXPANDS.slice(-3))) {
      for (const s of sources) await expectSamePage(f, `$select=ListingKey,ListPrice&$orderby=ListPrice desc&$top=600&$expand=${expand}`, s);
    }
  });

  it('generated nested $filter/$orderby/$select/$skip/$top (fast-check), pages and accounts', async () => {
    const names = fc.subarray(Object.keys(NAV_ARBITRARIES), { minLength: 1, maxLength: 3 });
    const query = names.chain((ns) => fc.tuple(fc.tuple(...ns.map(expandItem)), fc.integer({ min: 0, max: 550 }), fc.constantFrom(...SOURCES), fc.boolean()));
    let children = 0;
    await fc.assert(
      fc.asyncProperty(query, async ([items, skip, sources, ignoreNulls]) => {
        const q = `$select=ListingKey&$top=50&$skip=${skip}&$expand=${items.join(',')}${ignoreNulls ? '&$ignorenulls=true' : ''}`;
        const records = await expectSamePage(f, q, sources);
        for (const r of records) for (const v of Object.values(r)) if (Array.isArray(v)) children += v.length;
      }),
      { seed: 20251126, numRuns: 120 },
    );
    expect(children).toBeGreaterThan(1000);
  });
});

// ---------------------------------------------------------------------------------------------
// Hand-made record sets (test/exec/expand.test.ts, test/exec/roster.test.ts)
// ---------------------------------------------------------------------------------------------

describe.skipIf(pgSkip)('PreferredMedia rules', () => {
  let f: Fixture;
  beforeAll(async () => {
    f = await fixture('pref', preferredMediaData());
  }, 60_000);

  const preferred = async (key: string, options = ''): Promise<string[]> => {
    const records = await expectSamePage(f, `$filter=ListingKey eq '${key}'&$expand=PreferredMedia${options}`);
    return keysOf(records[0].PreferredMedia);
  };

  it('the rules of test/exec/expand.test.ts, with the engine giving the same', async () => {
    expect(await preferred('L1')).toEqual(['L1-c', 'L1-a']);
    expect(await preferred('L2')).toEqual(['L2-b', 'L2-a']);
    expect(await preferred('L3')).toEqual(['L3-y', 'L3-z']);
    expect(await preferred('L4')).toEqual(['L4-p4', 'L4-p3']);
    expect(await preferred('L5')).toEqual(['L5-p', 'L5-n']);
    expect(await preferred('L6')).toEqual(['L6-a', 'L6-c']);
    expect(await preferred('L7')).toEqual(['L7-only']);
    expect(await preferred('L8')).toEqual([]);
    expect(await preferred('L9')).toEqual([]);
    expect(await preferred('L10')).toEqual(['L10-p', 'L10-null']);
    expect(await preferred('L2', "($filter=MediaKey ne 'L2-b')")).toEqual(['L2-d', 'L2-a']);
    expect(await preferred('L1', '($filter=Order ge 2)')).toEqual(['L1-c', 'L1-b']);
    expect(await preferred('L3', '($filter=Order gt 100)')).toEqual([]);
    expect(await preferred('L1', '($orderby=Order)')).toEqual(['L1-a', 'L1-c']);
    expect(await preferred('L1', '($top=1)')).toEqual(['L1-c']);
    expect(await preferred('L1', '($skip=1)')).toEqual(['L1-a']);
    expect(await preferred('L6', '($orderby=Order desc)')).toEqual(['L6-a', 'L6-c']);
  });

  it('the whole page, with Media (never the Member medium) and nested options', async () => {
    for (const expand of [
      'PreferredMedia,Media',
      'PreferredMedia($select=Order;$orderby=PreferredPhotoYN desc,Order desc),Media($orderby=MediaCategory desc)',
      'PreferredMedia($filter=Order ne null and Order lt 4;$skip=1;$top=1)',
    ]) {
      const records = await expectSamePage(f, `$expand=${expand}`);
      expect(records).toHaveLength(10);
      expect(records.flatMap((r) => keysOf(r.Media ?? []))).not.toContain('L1-member');
    }
  });
});

describe.skipIf(pgSkip)('expansions on hand-made records: nulls, ties, time zones, visibility', () => {
  let f: Fixture;
  beforeAll(async () => {
    // test/exec/expand.test.ts's set, and more: a null Order, a quote in keys and values, keys and
    // values whose code point order and UTF-16 order disagree, equal instants and one a millisecond on
    const data = handMadeData();
    f = await fixture('hand', {
      Property: [...data.Property, listing("L'5", 'A')],
      Media: [
        ...data.Media,
        media('L1', 'M-e', null, { ImageWidth: 100, MediaCategory: null }),
        media('L4', 'M-\uFF21', 2, { ImageOf: 'x\u{1F600}' }),
        media('L4', 'M-\u{1F600}', 2, { ImageOf: 'x\uFF21' }),
        media('L4', 'M-\uE000', 2, { ImageOf: 'x\u{10400}' }),
        media("L'5", "M'q", 1, { MediaCategory: "Photo'" }),
      ],
      OpenHouse: [...data.OpenHouse, { OpenHouseKey: 'O-4', ListingKey: 'L1', OpenHouseStartTime: '2025-06-07T17:00:00.001Z' }],
      PropertyChange: [...data.PropertyChange, { PropertyChangeKey: 'C-m', ListingKey: 'L1' }],
    });
  }, 60_000);

  const one = async (key: string, q: string, sources?: string[]): Promise<Rec> =>
    (await expectSamePage(f, `$filter=ListingKey eq '${key.replace(/'/g, "''")}'&${q}`, sources))[0];

  it('default orders: nulls lowest, instants not text, ties by the child key', async () => {
    const rec = await one('L1', '$expand=Media,OpenHouse,PropertyChange');
    expect(keysOf(rec.Media)).toEqual(['M-e', 'M-d', 'M-b', 'M-c', 'M-a']);
    expect(keysOf(rec.OpenHouse)).toEqual(['O-0', 'O-1', 'O-2', 'O-3', 'O-4']);
    expect(keysOf(rec.PropertyChange)).toEqual(['C-z', 'C-a', 'C-b', 'C-m', 'C-n']);
  });

  it('nested $orderby ties by the child key; nested $filter three-valued; $select; $ignorenulls', async () => {
    for (const q of [
      '$expand=Media($orderby=ImageWidth desc)',
      '$expand=Media($orderby=ImageWidth)',
      '$expand=Media($orderby=ImageWidth desc;$skip=1;$top=2)',
      '$expand=PropertyChange($orderby=FieldName desc,ModificationTimestamp)',
      '$expand=PropertyChange($orderby=FieldName,ModificationTimestamp desc)',
      '$expand=Media($filter=ImageWidth ne 800)',
      '$expand=Media($filter=ImageWidth lt 10000)',
      '$expand=Media($filter=not (ImageWidth gt 700))',
      '$expand=Media($filter=not (MediaCategory eq null or ImageWidth ge 800))',
      '$expand=OpenHouse($filter=OpenHouseStartTime eq 2025-06-07T17:00:00Z)',
      '$expand=OpenHouse($filter=OpenHouseStartTime le 2025-06-07T17:00:00Z;$orderby=OpenHouseStartTime desc)',
      "$expand=PropertyChange($filter=not (FieldName eq 'ListPrice') and ModificationTimestamp ne null)",
      '$select=ListingKey&$expand=OpenHouse($select=OpenHouseStartTime,ListingKey;$top=2)',
      '$select=ListingKey&$expand=Media($select=*;$top=1)',
      '$select=ListingKey&$ignorenulls=true&$expand=OpenHouse($select=OpenHouseStartTime,OpenHouseRemarks)',
      '$select=ListingKey&$expand=OpenHouse($select=OpenHouseRemarks;$top=1)',
      '$select=ListPrice&$expand=PropertyChange($top=1),Media($top=0),OpenHouse($top=1;$select=OpenHouseKey)',
      '$expand=PreferredMedia',
      '$expand=PreferredMedia($orderby=ImageWidth desc),Media($orderby=MediaCategory desc,Order)',
    ]) {
      await one('L1', q);
    }
    expect(keysOf((await one('L1', '$expand=Media($orderby=ImageWidth desc;$skip=1;$top=2)')).Media)).toEqual(['M-c', 'M-d']);
  });

  it('ties by key and string orders in UTF-16 order (not code point order), by default and under a $orderby', async () => {
    const utf16 = ['M-l4', 'M-\u{1F600}', 'M-\uE000', 'M-\uFF21'];
    expect(keysOf((await one('L4', '$expand=Media')).Media)).toEqual(utf16);
    expect(keysOf((await one('L4', '$expand=Media($orderby=Order)')).Media)).toEqual(utf16);
    expect(keysOf((await one('L4', '$expand=Media($orderby=ImageOf desc)')).Media)).toEqual(['M-\u{1F600}', 'M-\uFF21', 'M-\uE000', 'M-l4']);
    await one('L4', '$expand=Media($orderby=ImageOf;$skip=1;$top=2),PreferredMedia($orderby=ImageOf)');
    await one('L4', '$expand=PreferredMedia($orderby=Order desc),OpenHouse($orderby=OpenHouseKey desc)');
  });

  it('a listing without children; keys with quotes', async () => {
    expect(await one('L2', '$select=ListingKey&$expand=Media,OpenHouse,PreferredMedia,PropertyChange($top=0)')).toEqual({
      ListingKey: 'L2',
      Media: [],
      OpenHouse: [],
      PreferredMedia: [],
      PropertyChange: [],
    });
    expect(keysOf((await one("L'5", "$expand=Media($filter=MediaCategory eq 'Photo''')")).Media)).toEqual(["M'q"]);
    expect(keysOf((await one("L'5", '$expand=PreferredMedia')).PreferredMedia)).toEqual([]);
  });

  it('only children of visible listings', async () => {
    const records = await expectSamePage(f, '$select=ListingKey&$expand=Media,OpenHouse,PreferredMedia', ['A']);
    expect(records.map((r) => r.ListingKey)).toEqual(["L'5", 'L1', 'L2', 'L4']);
    expect(records.flatMap((r) => keysOf(r.Media))).not.toContain('M-hidden');
    expect(keysOf((await one('L3', '$expand=Media', ['B'])).Media)).toEqual(['M-hidden']);
  });
});

describe.skipIf(pgSkip)('ListAgent ... CoBuyerOffice on hand-made records', () => {
  let f: Fixture;
  let bare: Fixture;
  beforeAll(async () => {
    f = await fixture('roster', {
      Property: [
        { ListingKey: 'L1', OriginatingSystemName: 'A', ListAgentKey: 'M1', BuyerAgentKey: 'M2', ListOfficeKey: 'O1', CoListAgentKey: 'M1' },
        { ListingKey: 'L2', OriginatingSystemName: 'B', ListAgentKey: 'M2', ListOfficeKey: 'O9', BuyerOfficeKey: 'O2' },
        { ListingKey: 'L3', OriginatingSystemName: 'A', ListAgentKey: 'M3', CoBuyerAgentKey: 'M-gone' },
      ],
      Member: [
        { MemberKey: 'M1', MemberFullName: 'Ann One', OriginatingSystemName: 'A' },
        { MemberKey: 'M2', MemberFullName: 'Bob Two', OriginatingSystemName: 'B' },
        { MemberKey: 'M3', MemberFullName: null, OriginatingSystemName: 'A', MemberStatus: 'Inactive' },
      ],
      Office: [
        { OfficeKey: 'O1', OfficeName: 'First', OriginatingSystemName: 'A' },
        { OfficeKey: 'O2', OfficeName: 'Second', OriginatingSystemName: 'B', OfficeCity: 'Seattle' },
      ],
    });
    // a roster without OriginatingSystemName: hidden from every caller limited to sources
    bare = await fixture('bare', {
      Property: [{ ListingKey: 'L1', OriginatingSystemName: 'A', ListAgentKey: 'M1', ListOfficeKey: 'O1' }],
      Member: [{ MemberKey: 'M1', MemberFullName: 'No Source' }],
    });
  }, 60_000);

  it('records by key, or null: not there, another source, nested $filter not true; $select; $ignorenulls', async () => {
    const all = REFERENCES.join(',');
    for (const sources of [undefined, ['A'], ['B'], ['A', 'B'], []]) {
      await expectSamePage(f, `$select=ListingKey&$expand=${all}`, sources);
      await expectSamePage(f, `$select=ListingKey&$expand=${all}&$ignorenulls=true`, sources);
      await expectSamePage(
        f,
        "$expand=ListAgent($select=MemberFullName;$filter=MemberStatus ne 'Inactive'),BuyerOffice($filter=OfficeCity eq 'Seattle'),CoListAgent($filter=not (MemberFullName eq null))",
        sources,
      );
    }
    const records = await expectSamePage(f, '$select=ListingKey&$expand=ListAgent($select=MemberFullName),BuyerAgent($select=MemberKey),ListOffice', ['A']);
    expect(records).toEqual([
      {
        ListingKey: 'L1',
        ListAgent: { MemberKey: 'M1', MemberFullName: 'Ann One' },
        BuyerAgent: null,
        ListOffice: { OfficeKey: 'O1', OfficeCity: null, OfficeName: 'First', OriginatingSystemName: 'A' },
      },
      { ListingKey: 'L3', ListAgent: { MemberKey: 'M3', MemberFullName: null }, BuyerAgent: null, ListOffice: null },
    ]);
    for (const sources of [undefined, ['A'], []]) await expectSamePage(bare, '$expand=ListAgent,ListOffice,Media,PreferredMedia,OpenHouse', sources);
  });
});

// ---------------------------------------------------------------------------------------------
// Navigation paths: childrenScope
// ---------------------------------------------------------------------------------------------

/** Nested options of test/exec/navigate.test.ts, as a navigation path's query options. */
const PATH_OPTIONS: Record<ChildNavigation, readonly string[]> = {
  Media: [
    '',
    "$filter=MediaCategory eq 'Photo' and Order le 10&$orderby=ImageWidth desc,Order&$skip=1&$top=4&$select=MediaKey,Order,ImageWidth",
    '$orderby=MediaCategory,ImageHeight desc&$select=MediaCategory,ImageHeight',
    '$skip=3&$top=12',
    '$filter=ImageWidth ge 1024&$select=MediaURL',
  ],
  PreferredMedia: ['', '$filter=ImageWidth ge 2000&$select=Order,PreferredPhotoYN', '$orderby=Order desc&$top=1', '$skip=1', '$filter=Order ne null'],
  OpenHouse: ['', '$orderby=OpenHouseType desc&$select=OpenHouseType,OpenHouseStartTime', '$filter=OpenHouseStartTime gt now()&$top=1', '$skip=1'],
  PropertyChange: [
    '',
    "$filter=FieldName eq 'ListPrice' or ChangeType eq 'Pending'&$orderby=ModificationTimestamp&$top=3",
    '$skip=1&$select=FieldName',
    '$orderby=FieldName,NewValue desc',
  ],
};

/**
 * A navigation path run through childrenScope as a caller's core statement would: the records of
 * `$filter`, `$orderby` (ties by key) or the default order, `$skip`, `$top`, and the `$count`.
 */
async function navigateOnPg(f: Fixture, key: string, nav: ChildNavigation, query: string): Promise<{ value: Rec[]; count: number }> {
  const plan = f.engine.explain('Property', query, { format: 'json', navigation: { key, name: nav } });
  const schema = f.engine.schemaOf(plan.resource);
  const params = new Params();
  const fc = { schema, alias: 't', table: f.layout.table(plan.resource), params, nowMs: NOW, search: () => 'FALSE' };
  const filter = plan.filter === null ? null : compileFilter(plan.filter, fc);
  const scope = childrenScope(nav, key, { layout: f.layout, schema, alias: 't', params, filter });
  const keys = plan.order.map((k) => {
    if (k.kind !== 'expr') throw new Error('no relevance on children');
    return k;
  });
  const order = keys.length ? [...orderItems(keys, fc), scope.keyOrder] : scope.defaultOrder;
  const reader = recordReader(schema, 't', plan.select);
  const values = [...params.values];
  const page = `SELECT ${reader.columns} FROM ${scope.from} WHERE ${scope.where} ORDER BY ${order.join(', ')} OFFSET ${plan.page.skip} LIMIT ${plan.page.rows}`;
  const res = await pool.query({ text: page, values, rowMode: 'array' });
  const count = await pool.query({ text: `SELECT count(*)::int AS n FROM ${scope.from} WHERE ${scope.where}`, values });
  const value = (res.rows as unknown[][]).map((row) => {
    const r = reader.decode(row, 0, NOW);
    if (plan.ignoreNulls) for (const k of Object.keys(r)) if (r[k] === null) delete r[k];
    return r;
  });
  return { value, count: (count.rows[0] as { n: number }).n };
}

describe.skipIf(pgSkip)('childrenScope: navigation paths equal engine.navigate', () => {
  let f: Fixture;
  let hand: Fixture;
  beforeAll(async () => {
    f = await fixture('nav');
    hand = await fixture('navhand', {
      Property: [listing('L1'), listing('L2')],
      Media: [
        media('L1', 'M-c', 2, { ImageWidth: 800, ImageHeight: 600, MediaURL: 'u' }),
        media('L1', 'M-b', 2),
        media('L1', 'M-a', 3, { ImageWidth: 800, PreferredPhotoYN: true, ModificationTimestamp: '2025-01-01T00:00:00+01:00' }),
        media('L1', 'M-e', null, { MediaCategory: null }),
        media('L1', 'M-v', 0, { MediaCategory: 'Video', PreferredPhotoYN: true }),
        { ...media('L1', 'M-member', 0), ResourceName: 'Member' },
      ],
      OpenHouse: [
        { OpenHouseKey: 'O-1', ListingKey: 'L1', OpenHouseStartTime: '2025-06-07T12:00:00-05:00', OpenHouseType: 'Public' },
        { OpenHouseKey: 'O-0', ListingKey: 'L1' },
        { OpenHouseKey: 'O-2', ListingKey: 'L1', OpenHouseStartTime: '2025-06-07T17:00:00Z', OpenHouseType: 'Public' },
      ],
      PropertyChange: [
        { PropertyChangeKey: 'C-n', ListingKey: 'L1', FieldName: 'StandardStatus', NewValue: 'Active', ChangeType: 'Pending' },
        { PropertyChangeKey: 'C-a', ListingKey: 'L1', FieldName: 'ListPrice', ModificationTimestamp: '2025-05-01T00:00:00Z' },
        { PropertyChangeKey: 'C-b', ListingKey: 'L1', FieldName: 'ListPrice', NewValue: '5', ModificationTimestamp: '2025-05-01T00:00:00Z' },
      ],
    });
  }, 120_000);

  const check = async (fx: Fixture, key: string, nav: ChildNavigation, options: string): Promise<number> => {
    const query = `${options}${options ? '&' : ''}$count=true${options.includes('$top') ? '' : '&$top=25000'}`;
    const want = fx.engine.navigate('Property', key, nav, query);
    const got = await navigateOnPg(fx, key, nav, query);
    expect(JSON.stringify(got.value), `${key}/${nav}?${query}`).toBe(JSON.stringify(want.value));
    expect(got.count, `${key}/${nav}?${query} count`).toBe(want['@odata.count']);
    return want.value.length;
  };

  it('every navigation property and options on many listings', async () => {
    const keys = (f.engine.query('Property', '$select=ListingKey&$top=2000').value as Rec[]).map((r) => r.ListingKey as string);
    const sample = keys.filter((_, i) => i % 97 === 0 || i === keys.length - 1);
    const withOpenHouse = (f.engine.query('Property', '$select=ListingKey&$top=2000&$expand=OpenHouse($select=OpenHouseKey)').value as Rec[])
      .filter((r) => (r.OpenHouse as Rec[]).length >= 2)
      .slice(0, 4)
      .map((r) => r.ListingKey as string);
    let rows = 0;
    for (const key of [...sample, ...withOpenHouse]) {
      for (const nav of NAVS) for (const options of PATH_OPTIONS[nav]) rows += await check(f, key, nav, options);
    }
    expect(rows).toBeGreaterThan(500);
  });

  it('nulls, ties and the Member medium on hand-made records; a listing without children', async () => {
    for (const key of ['L1', 'L2']) {
      for (const nav of NAVS) {
        for (const options of [...PATH_OPTIONS[nav], '$orderby=ModificationTimestamp desc', '$ignorenulls=true&$skip=0']) {
          if (options.includes('ModificationTimestamp') && nav === 'OpenHouse') continue;
          await check(hand, key, nav, options);
        }
      }
    }
    expect((await navigateOnPg(hand, 'L1', 'PreferredMedia', '$count=true')).value.map((r) => r.MediaKey)).toEqual(['M-a', 'M-e']);
    expect((await navigateOnPg(hand, 'L1', 'Media', '')).value.map((r) => r.MediaKey)).toEqual(['M-e', 'M-v', 'M-b', 'M-c', 'M-a']);
  });

  it('the listing key is a bind parameter; an unknown key has no children', async () => {
    const params = new Params();
    const schema = f.engine.schemaOf('Media');
    const scope = childrenScope('Media', "x' OR TRUE --", { layout: f.layout, schema, alias: 't', params, filter: null });
    expect(scope.where).not.toContain('OR TRUE');
    expect(params.values).toEqual(["x' OR TRUE --"]);
    const res = await pool.query({ text: `SELECT count(*)::int AS n FROM ${scope.from} WHERE ${scope.where}`, values: params.values });
    expect(res.rows[0]).toEqual({ n: 0 });
    expect(() => childrenScope('Media', 'K', { layout: f.layout, schema, alias: 't; DROP', params, filter: null })).toThrow(/alias/);
  });

  it("$apply groups over the scope: the children, and PreferredMedia's picks", async () => {
    const keys = (f.engine.query('Property', '$select=ListingKey&$top=2000').value as Rec[]).map((r) => r.ListingKey as string).filter((_, i) => i % 199 === 0);
    for (const key of keys) {
      for (const nav of ['Media', 'PreferredMedia'] as const) {
        const want = f.engine.navigate('Property', key, nav, '$apply=groupby((MediaCategory),aggregate($count as n,ImageWidth with max as w))').value;
        const params = new Params();
        const scope = childrenScope(nav, key, { layout: f.layout, schema: f.engine.schemaOf('Media'), alias: 'm', params, filter: null });
        const res = await pool.query({
          text: `SELECT m."MediaCategory", count(*)::int AS n, max(m."ImageWidth")::float8 AS w FROM ${scope.from} WHERE ${scope.where} GROUP BY 1 ORDER BY 1 NULLS FIRST`,
          values: params.values,
        });
        expect(res.rows, `${key}/${nav}`).toEqual(want);
        if (nav === 'PreferredMedia') expect(want.reduce((n, g) => n + (g.n as number), 0)).toBeLessThanOrEqual(2);
      }
    }
  });
});

describe.skipIf(pgSkip)('errors', () => {
  let f: Fixture;
  beforeAll(async () => {
    f = await fixture('errs', handMadeData());
  }, 60_000);

  it("bad nested options are the binder's coded errors, before any statement", () => {
    for (const [q, code] of [
      ["$expand=Media($filter=search.text(KeywordSearchText,'pool'))", 'InvalidSearch'],
      ['$expand=Media($orderby=relevance desc)', 'RelevanceWithoutSearch'],
      ['$expand=Media($top=25001)', 'TopTooLarge'],
      ['$expand=ListAgent($top=1)', 'QueryOptionNotAllowed'],
      ['$expand=Media,Media', 'RepeatedExpand'],
      ['$expand=PropertyChange($select=NewValue)', 'UnknownField'],
    ] as const) {
      expect(() => planOf(f, q), q).toThrow(expect.objectContaining({ code }) as Error);
    }
  });

  it('a schema that is not loaded fails the statement (a PostgreSQL error, not an empty answer)', async () => {
    const plan = planOf(f, '$expand=Media,ListAgent');
    const ctx = { ...contextOf(f, pool, plan, undefined), layout: new Layout('not_loaded') };
    await expect(expandPage(plan.expand!, [{ key: 'L1', refs: { ListAgentKey: 'M1' } }], ctx)).rejects.toThrow(/does not exist/);
  });
});
