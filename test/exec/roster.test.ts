/**
 * Member and Office (SERVICE.md §2): the records the engine answers against the records it was
 * loaded from (fixtures/default), field for field and per account; the generator's roster against
 * the listings that name it; the ListAgent ... CoBuyerOffice expansions against the source records;
 * a data set without the files; snapshots; live upserts and removals.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync, copyFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_DATA_DIR, Engine, type QueryResource } from '../../src/engine.js';
import { QueryError } from '../../src/errors.js';
import { generateListings, generateRoster } from '../../src/generate/dataset.js';
import { parseQuery } from '../../src/odata/parse-query.js';
import { CATALOG, PROPERTY_REFERENCES } from '../../src/schema/catalog.js';
import { NaiveEngine } from './oracle.js';

type Rec = Record<string, unknown>;
const NOW = Date.parse('2025-06-01T00:00:00Z');
const clock = (): Date => new Date(NOW);
const readJsonl = (dir: string, name: string): Rec[] =>
  readFileSync(path.join(dir, name), 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Rec);

const members = readJsonl(DEFAULT_DATA_DIR, 'Member.jsonl');
const offices = readJsonl(DEFAULT_DATA_DIR, 'Office.jsonl');
const listings = readJsonl(DEFAULT_DATA_DIR, 'Property.jsonl');
const SOURCES: ReadonlyArray<readonly string[] | undefined> = [undefined, ['CRMLS', 'NWMLS', 'ARMLS', 'HAR'], ['HAR', 'MRED'], ['Nowhere'], []];

/** The record the engine should give for `input` with `fields` (absent ones null). */
const expected = (input: Rec, fields: readonly string[]): Rec => Object.fromEntries(fields.map((f) => [f, input[f] ?? null]));

const tmpDirs: string[] = [];
const tmp = (): string => {
  const d = mkdtempSync(path.join(os.tmpdir(), 'reso-roster-'));
  tmpDirs.push(d);
  return d;
};
afterAll(() => tmpDirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

let engine: Engine;
beforeAll(async () => {
  engine = await Engine.open({ now: clock });
});

describe('Member and Office of the default data set', () => {
  for (const [resource, inputs] of [
    ['Member', members],
    ['Office', offices],
  ] as const) {
    it(`${resource}: every record, every field, as loaded, for every account`, () => {
      const fields = engine.schemaOf(resource).fields.map((f) => f.name);
      expect(fields[0]).toBe(CATALOG[resource].key);
      expect(fields).toContain('OriginatingSystemName');
      const key = CATALOG[resource].key;
      for (const sources of SOURCES) {
        const want = inputs
          .filter((r) => sources === undefined || sources.includes(r.OriginatingSystemName as string))
          .sort((a, b) => ((a[key] as string) < (b[key] as string) ? -1 : 1))
          .map((r) => expected(r, fields));
        const got = engine.query(resource, '$top=50000&$count=true', { sources });
        expect(got['@odata.count'], String(sources)).toBe(want.length);
        expect(got.value).toEqual(want);
      }
      expect(inputs.length).toBeGreaterThan(10);
    });
  }

  it('takes every query option, as the naive oracle answers them', () => {
    const naive = new NaiveEngine(members, NOW, 'MemberKey');
    const queries = [
      ["MemberStatus eq 'Inactive'", 'MemberLastName desc'],
      ["startswith(MemberLastName,'M') and OriginatingSystemName in ('CRMLS','HAR')", 'ModificationTimestamp'],
      ["contains(MemberEmail,'an') or OfficeKey eq 'O-NWO1007'", 'OfficeName,MemberFirstName desc'],
      ['ModificationTimestamp ge 2025-01-01T00:00:00Z', 'ModificationTimestamp desc'],
    ];
    for (const [filter, orderby] of queries) {
      const parsed = parseQuery(`$filter=${filter}&$orderby=${orderby}`);
      for (const sources of SOURCES) {
        const want = naive.query(parsed.filter, parsed.orderby, (r) => sources === undefined || sources.includes(r.OriginatingSystemName as string));
        const got = engine.query('Member', `$filter=${filter}&$orderby=${orderby}&$select=MemberKey&$count=true&$top=50000`, { sources });
        expect(
          got.value.map((r) => r.MemberKey),
          `${filter} ${String(sources)}`,
        ).toEqual(want);
        expect(got['@odata.count']).toBe(want.length);
        const paged = engine.query('Member', `$filter=${filter}&$orderby=${orderby}&$select=MemberKey&$skip=3&$top=4`, { sources });
        expect(paged.value.map((r) => r.MemberKey)).toEqual(want.slice(3, 7));
      }
    }
    const grouped = engine.query('Office', '$apply=groupby((OriginatingSystemName),aggregate($count as n))', { sources: ['HAR', 'MRED'] });
    expect(grouped.value).toEqual(['HAR', 'MRED'].map((s) => ({ OriginatingSystemName: s, n: offices.filter((o) => o.OriginatingSystemName === s).length })));
    const page = engine.query('Member', '$select=MemberKey');
    expect(page.value).toHaveLength(10);
    expect(page['@odata.nextLink']).toMatch(/^Member\?\$select=MemberKey&\$skip=10&\$skiptoken=/);
  });

  it('refuses what does not apply, with coded errors', () => {
    const fail = (resource: QueryResource, q: string): string => {
      try {
        engine.query(resource, q);
      } catch (e) {
        expect(e).toBeInstanceOf(QueryError);
        return (e as QueryError).code;
      }
      throw new Error(`no error for ${resource} ${q}`);
    };
    expect(fail('Member', '$top=50001')).toBe('TopTooLarge');
    expect(fail('Member', '$expand=Media')).toBe('UnknownExpand');
    expect(fail('Member', '$filter=ListPrice gt 5')).toBe('UnknownField');
    expect(fail('Office', "$filter=search.text(ListOfficeSearchText,'summit')")).toBe('InvalidSearch');
  });
});

describe('the generator: listings name the roster it writes', () => {
  it('every agent and office key a listing carries resolves to a record with the same ids and names', () => {
    for (const [n, seed] of [
      [2000, 'default'],
      [600, 'roster'],
    ] as const) {
      const roster = generateRoster({ listings: n, seed });
      const memberByKey = new Map(roster.members.map((m) => [m.MemberKey as string, m]));
      const officeByKey = new Map(roster.offices.map((o) => [o.OfficeKey as string, o]));
      expect(memberByKey.size).toBe(roster.members.length);
      expect(officeByKey.size).toBe(roster.offices.length);
      let named = 0;
      for (const { property: p } of generateListings({ listings: n, seed })) {
        for (const role of ['ListAgent', 'CoListAgent', 'BuyerAgent', 'CoBuyerAgent']) {
          const key = p[`${role}Key`] as string | undefined;
          const named_ = p[`${role}MlsId`] ?? p[`${role}FullName`] ?? p[`${role}FirstName`];
          if (key === undefined) {
            expect(named_, `${p.ListingKey as string} ${role}`).toBeUndefined();
            continue;
          }
          named++;
          const m = memberByKey.get(key)!;
          expect(m, `${p.ListingKey as string} ${role}Key ${key}`).toBeDefined();
          expect(m.OriginatingSystemName).toBe(p.OriginatingSystemName);
          if (p[`${role}MlsId`] !== undefined) expect(m.MemberMlsId).toBe(p[`${role}MlsId`]);
          if (p[`${role}FullName`] !== undefined) expect(m.MemberFullName).toBe(p[`${role}FullName`]);
          if (p[`${role}FirstName`] !== undefined) expect(m.MemberFirstName).toBe(p[`${role}FirstName`]);
          if (p[`${role}LastName`] !== undefined) expect(m.MemberLastName).toBe(p[`${role}LastName`]);
        }
        for (const role of ['ListOffice', 'CoListOffice', 'BuyerOffice', 'CoBuyerOffice']) {
          const key = p[`${role}Key`] as string | undefined;
          if (key === undefined) {
            expect(p[`${role}Name`] ?? p[`${role}MlsId`], `${p.ListingKey as string} ${role}`).toBeUndefined();
            continue;
          }
          const o = officeByKey.get(key)!;
          expect(o, `${p.ListingKey as string} ${role}Key ${key}`).toBeDefined();
          expect(o.OriginatingSystemName).toBe(p.OriginatingSystemName);
          if (p[`${role}MlsId`] !== undefined) expect(o.OfficeMlsId).toBe(p[`${role}MlsId`]);
          if (p[`${role}Name`] !== undefined) expect(o.OfficeName).toBe(p[`${role}Name`]);
        }
        // an agent's office is the office the listing names for the same role
        const agent = memberByKey.get(p.ListAgentKey as string)!;
        expect(agent.OfficeKey).toBe(p.ListOfficeKey);
        expect(agent.OfficeName).toBe(p.ListOfficeName);
      }
      expect(named).toBeGreaterThan(n);
      for (const m of roster.members) expect(officeByKey.get(m.OfficeKey as string)?.OfficeName).toBe(m.OfficeName);
    }
    expect(generateRoster({ listings: 50, seed: 7 })).toEqual(generateRoster({ listings: 50, seed: 7 }));
    expect(generateRoster({ listings: 50, seed: 7 })).not.toEqual(generateRoster({ listings: 50, seed: 8 }));
  });
});

describe('ListAgent, BuyerAgent, ... CoBuyerOffice', () => {
  const memberByKey = new Map(members.map((m) => [m.MemberKey as string, m]));
  const officeByKey = new Map(offices.map((o) => [o.OfficeKey as string, o]));
  const targetOf = (resource: 'Member' | 'Office', key: unknown): Rec | undefined =>
    typeof key === 'string' ? (resource === 'Member' ? memberByKey : officeByKey).get(key) : undefined;

  it('expand each listing to the records its key fields name (or null), for every account', () => {
    const names = PROPERTY_REFERENCES.map((r) => r.name);
    for (const sources of SOURCES) {
      const got = engine.query('Property', `$select=ListingKey&$expand=${names.join(',')}&$top=2000`, { sources });
      const visible = listings.filter((p) => sources === undefined || sources.includes(p.OriginatingSystemName as string));
      expect(got.value.map((r) => r.ListingKey)).toEqual(visible.map((p) => p.ListingKey));
      const seen = new Set<string>();
      got.value.forEach((rec, i) => {
        expect(Object.keys(rec)).toEqual(['ListingKey', ...names]);
        for (const ref of PROPERTY_REFERENCES) {
          const target = targetOf(ref.target, visible[i][ref.field]);
          const fields = engine.schemaOf(ref.target).fields.map((f) => f.name);
          expect(rec[ref.name], `${visible[i].ListingKey as string} ${ref.name}`).toEqual(target === undefined ? null : expected(target, fields));
          if (target !== undefined) seen.add(ref.name);
        }
      });
      if (sources === undefined) expect([...seen].sort()).toEqual([...names].sort());
    }
  });

  it('apply nested $select and $filter; ordering or paging one record is a 400', () => {
    const got = engine.query(
      'Property',
      "$select=ListingKey,ListAgentKey&$expand=ListAgent($select=MemberFullName,OfficeKey),ListOffice($filter=OfficeCity eq 'Seattle')&$top=300",
    );
    for (const rec of got.value) {
      const p = listings.find((l) => l.ListingKey === rec.ListingKey)!;
      const m = memberByKey.get(p.ListAgentKey as string)!;
      expect(rec.ListAgent).toEqual({ MemberKey: m.MemberKey, MemberFullName: m.MemberFullName, OfficeKey: m.OfficeKey });
      const o = officeByKey.get(p.ListOfficeKey as string)!;
      expect(rec.ListOffice === null ? null : (rec.ListOffice as Rec).OfficeKey).toBe(o.OfficeCity === 'Seattle' ? o.OfficeKey : null);
    }
    for (const option of ['$orderby=MemberKey', '$top=1', '$skip=0']) {
      try {
        engine.query('Property', `$expand=ListAgent(${option})`);
        throw new Error(`accepted ${option}`);
      } catch (e) {
        expect((e as QueryError).code).toBe('QueryOptionNotAllowed');
        expect((e as QueryError).option).toBe('$expand');
      }
    }
    const one = engine.entity('Property', listings[0].ListingKey as string, '$select=ListingKey&$expand=BuyerOffice($select=OfficeName)&$ignorenulls=true');
    const office = officeByKey.get(listings[0].BuyerOfficeKey as string);
    expect(one).toEqual({ ListingKey: listings[0].ListingKey, BuyerOffice: office ? { OfficeKey: office.OfficeKey, OfficeName: office.OfficeName } : null });
  });

  it('never show a Member or Office of another source, and follow upserts and removals', async () => {
    const e = await Engine.open({
      now: clock,
      data: {
        Property: [
          { ListingKey: 'L1', OriginatingSystemName: 'A', ListAgentKey: 'M1', BuyerAgentKey: 'M2', ListOfficeKey: 'O1' },
          { ListingKey: 'L2', OriginatingSystemName: 'B', ListAgentKey: 'M2', ListOfficeKey: 'O9' },
        ],
        Member: [
          { MemberKey: 'M1', MemberFullName: 'Ann One', OriginatingSystemName: 'A' },
          { MemberKey: 'M2', MemberFullName: 'Bob Two', OriginatingSystemName: 'B' },
        ],
        Office: [{ OfficeKey: 'O1', OfficeName: 'First', OriginatingSystemName: 'A' }],
      },
    });
    const expand = (sources?: string[]) =>
      e.query('Property', '$select=ListingKey&$expand=ListAgent($select=MemberFullName),BuyerAgent($select=MemberKey),ListOffice', { sources }).value;
    expect(expand()).toEqual([
      {
        ListingKey: 'L1',
        ListAgent: { MemberKey: 'M1', MemberFullName: 'Ann One' },
        BuyerAgent: { MemberKey: 'M2' },
        ListOffice: { OfficeKey: 'O1', OfficeName: 'First', OriginatingSystemName: 'A' },
      },
      { ListingKey: 'L2', ListAgent: { MemberKey: 'M2', MemberFullName: 'Bob Two' }, BuyerAgent: null, ListOffice: null },
    ]);
    // a listing of A naming a Member of B: the caller limited to A sees the listing, not the Member
    expect(expand(['A'])).toEqual([
      {
        ListingKey: 'L1',
        ListAgent: { MemberKey: 'M1', MemberFullName: 'Ann One' },
        BuyerAgent: null,
        ListOffice: { OfficeKey: 'O1', OfficeName: 'First', OriginatingSystemName: 'A' },
      },
    ]);
    expect(e.query('Member', '$select=MemberKey', { sources: ['A'] }).value).toEqual([{ MemberKey: 'M1' }]);
    expect(e.isVisible('Member', 'M2', ['A'])).toBe(false);
    expect(e.isVisible('Member', 'M2', ['B'])).toBe(true);

    // removing a Member leaves the listings that name it; the expansion becomes null
    expect(await e.remove('Member', ['M1', 'M7'])).toMatchObject({ removed: 1, notFound: 1 });
    expect(e.query('Property', '$select=ListingKey&$count=true').value.map((r) => r.ListingKey)).toEqual(['L1', 'L2']);
    expect(expand()[0].ListAgent).toBeNull();
    expect(e.query('Member', '$select=MemberKey').value).toEqual([{ MemberKey: 'M2' }]);
    // an upsert adds it back, replaces it, adds a new field; Office O9 appears for L2
    await e.apply([
      { resource: 'Member', upsert: [{ MemberKey: 'M1', MemberFullName: 'Ann Again', OriginatingSystemName: 'A', MemberNickname: 'Annie' }] },
      { resource: 'Office', upsert: [{ OfficeKey: 'O9', OfficeName: 'Ninth', OriginatingSystemName: 'B' }] },
    ]);
    expect(expand()[0].ListAgent).toEqual({ MemberKey: 'M1', MemberFullName: 'Ann Again' });
    expect(expand()[1].ListOffice).toEqual({ OfficeKey: 'O9', OfficeName: 'Ninth', OriginatingSystemName: 'B' });
    expect(expand(['A'])).toHaveLength(1);
    expect(e.query('Member', "$filter=MemberNickname eq 'Annie'&$select=MemberKey").value).toEqual([{ MemberKey: 'M1' }]);
    // a Member without a source of its own is nobody's but an unrestricted caller's
    await e.upsert('Member', [{ MemberKey: 'M3' }]);
    expect(e.query('Member', '$select=MemberKey&$count=true', { sources: ['A', 'B'] })['@odata.count']).toBe(2);
    expect(e.query('Member', '$select=MemberKey&$count=true')['@odata.count']).toBe(3);
    // bad Member records are refused like any other, and nothing is applied
    await expect(e.upsert('Member', [{ MemberKey: 'M4', OriginatingSystemName: 'A' }, { MemberFullName: 'no key' }])).rejects.toMatchObject({
      code: 'MissingKey',
    });
    expect(e.has('Member', 'M4')).toBe(false);
    // removing a listing keeps its Members
    await e.remove('Property', ['L1']);
    expect(e.has('Member', 'M1')).toBe(true);
    // compaction keeps the roster as it is
    const before = [e.query('Member', '$top=100'), e.query('Office', '$top=100'), e.query('Property', '$expand=ListAgent,ListOffice')];
    await e.compact();
    expect([e.query('Member', '$top=100'), e.query('Office', '$top=100'), e.query('Property', '$expand=ListAgent,ListOffice')]).toEqual(
      before.map((r) => ({ ...r })),
    );
  });
});

describe('a data set without Member.jsonl and Office.jsonl', () => {
  it('loads; the resources are empty and the report says their files were absent', async () => {
    const dir = tmp();
    for (const f of ['Property.jsonl', 'Media.jsonl', 'OpenHouse.jsonl', 'PropertyChange.jsonl'])
      copyFileSync(path.join(DEFAULT_DATA_DIR, f), path.join(dir, f));
    const e = await Engine.open({ data: dir, now: clock });
    expect(e.store.report.resources.Member).toMatchObject({ file: null, absent: true, records: 0 });
    expect(e.store.report.resources.Office).toMatchObject({ file: null, absent: true, records: 0 });
    expect(e.store.report.resources.Property).toMatchObject({ file: 'Property.jsonl', absent: false });
    expect(e.query('Member', '$count=true')).toMatchObject({ value: [], '@odata.count': 0 });
    const page = e.query('Property', '$select=ListingKey&$expand=ListAgent,ListOffice&$top=3');
    for (const r of page.value) expect([r.ListAgent, r.ListOffice]).toEqual([null, null]);
  });

  it('reports a bad Member line with file and line, or skips it when asked', async () => {
    const dir = tmp();
    copyFileSync(path.join(DEFAULT_DATA_DIR, 'Property.jsonl'), path.join(dir, 'Property.jsonl'));
    writeFileSync(
      path.join(dir, 'Member.jsonl.gz'.replace('.gz', '')),
      ['{"MemberKey":"M1","OriginatingSystemName":"HAR"}', '{"MemberKey":"M2","ModificationTimestamp":"yesterday"}', '{"MemberKey":"M1"}', ''].join('\n'),
    );
    await expect(Engine.open({ data: dir, now: clock })).rejects.toMatchObject({ code: 'BadFieldValue', file: 'Member.jsonl', line: 2 });
    const e = await Engine.open({ data: dir, now: clock, skipBadRecords: true });
    expect(e.store.report.resources.Member).toMatchObject({ file: 'Member.jsonl', records: 1, skipped: 2 });
    expect(e.store.report.skipped.byCode).toEqual({ BadFieldValue: 1, DuplicateKey: 1 });
    expect(e.keys('Member')).toEqual(['M1']);
  });
});

describe('snapshots', () => {
  it('keep Member and Office, their changes and the expansions', async () => {
    const e = await Engine.open({ now: clock });
    await e.upsert('Member', [{ MemberKey: 'M-NEW', MemberFullName: 'New Agent', OriginatingSystemName: 'HAR' }]);
    await e.remove('Office', [offices[0].OfficeKey as string]);
    const file = path.join(tmp(), 'snap.bin');
    e.save(file);
    const back = await Engine.open({ snapshot: file, now: clock });
    for (const [r, q] of [
      ['Member', '$top=50000&$count=true'],
      ['Office', '$top=50000&$count=true'],
      ['Property', `$select=ListingKey&$expand=${PROPERTY_REFERENCES.map((x) => x.name).join(',')}&$top=2000`],
    ] as const) {
      for (const sources of SOURCES) expect(back.query(r, q, { sources }), `${r} ${String(sources)}`).toEqual(e.query(r, q, { sources }));
    }
    expect(back.has('Member', 'M-NEW')).toBe(true);
    expect(back.has('Office', offices[0].OfficeKey as string)).toBe(false);
    expect(back.store.report.resources.Member.records).toBe(members.length);
  });
});
