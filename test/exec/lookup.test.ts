/**
 * The Lookup resource (SERVICE.md §2, DESIGN.md "Lookup"): its rows against an independent
 * derivation from the data files and the DD 2.0 reference metadata; every value of every field
 * `$metadata` annotates with a LookupName joins a row; query options against the naive oracle; the
 * same rows for every account; live changes (a new value in the same generation, never removed,
 * nothing of a failed change); compaction; snapshots.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_DATA_DIR, Engine } from '../../src/engine.js';
import { QueryError } from '../../src/errors.js';
import { parseQuery } from '../../src/odata/parse-query.js';
import { metadataXml } from '../../src/service/edmx.js';
import { annotationOf, dd } from '../schema/dd-reference.js';
import { NaiveEngine } from './oracle.js';

type Rec = Record<string, unknown>;
const NOW = Date.parse('2025-06-01T00:00:00Z');
const clock = (): Date => new Date(NOW);
const ENUMS = 'org.reso.metadata.enums.';
const DATA = ['Property', 'Media', 'OpenHouse', 'PropertyChange', 'Member', 'Office'] as const;
const SOURCES: ReadonlyArray<readonly string[] | undefined> = [undefined, ['CRMLS', 'NWMLS', 'ARMLS', 'HAR'], ['HAR', 'MRED'], ['Nowhere'], []];

const readJsonl = (dir: string, name: string): Rec[] =>
  readFileSync(path.join(dir, name), 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Rec);

const ordinal = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** LookupKey as SERVICE.md's Lookup row documents it (DESIGN.md): SHA-256 of name NUL value, 16 hex digits. */
const keyOf = (name: string, value: string): string =>
  createHash('sha256')
    .update(name + '\0' + value)
    .digest('hex')
    .slice(0, 16);

/** The DD's lookup fields by resource: field name -> short LookupName, read from the reference metadata. */
const ddLookupFields = new Map<string, Map<string, string>>();
for (const f of dd.fields as ReadonlyArray<{ resourceName: string; fieldName: string; type: string }>) {
  if (!f.type.startsWith(ENUMS)) continue;
  const m = ddLookupFields.get(f.resourceName) ?? new Map<string, string>();
  m.set(f.fieldName, f.type.slice(ENUMS.length));
  ddLookupFields.set(f.resourceName, m);
}
/** Standard values by short LookupName: StandardName -> LegacyODataValue. */
const ddStandard = new Map<string, Map<string, string>>();
for (const l of dd.lookups) {
  const name = l.lookupName.slice(ENUMS.length);
  const m = ddStandard.get(name) ?? new Map<string, string>();
  m.set(annotationOf(l, 'RESO.OData.Metadata.StandardName')!, annotationOf(l, 'RESO.OData.Metadata.LegacyODataValue')!);
  ddStandard.set(name, m);
}

/**
 * The Lookup rows records of each resource make, derived here on their own: every lookup field a
 * record carries (per the DD), each value one row; each standard value of those lookups one row;
 * standard rows dated by the DD's generatedOn, others by the earliest ModificationTimestamp of the
 * records carrying them.
 */
function expectedRows(data: Readonly<Record<string, readonly Rec[]>>): Rec[] {
  const values = new Map<string, { name: string; value: string; modified: number }>();
  const names = new Set<string>();
  for (const [resource, records] of Object.entries(data)) {
    const fields = ddLookupFields.get(resource) ?? new Map<string, string>();
    for (const r of records) {
      const modified = typeof r.ModificationTimestamp === 'string' ? Date.parse(r.ModificationTimestamp) : Infinity;
      for (const [field, v] of Object.entries(r)) {
        const name = fields.get(field);
        if (name === undefined) continue;
        names.add(name);
        for (const value of Array.isArray(v) ? v : [v]) {
          if (typeof value !== 'string') continue;
          const k = `${name}\u0000${value}`;
          const was = values.get(k);
          if (was === undefined) values.set(k, { name, value, modified });
          else was.modified = Math.min(was.modified, modified);
        }
      }
    }
  }
  for (const name of names) {
    for (const value of ddStandard.get(name)?.keys() ?? []) {
      const k = `${name}\u0000${value}`;
      if (!values.has(k)) values.set(k, { name, value, modified: Infinity });
    }
  }
  return [...values.values()]
    .map(({ name, value, modified }) => {
      const legacy = ddStandard.get(name)?.get(value);
      return {
        LookupKey: keyOf(name, value),
        LegacyODataValue: legacy ?? null,
        LookupName: name,
        LookupValue: value,
        ModificationTimestamp: legacy !== undefined ? dd.generatedOn : modified === Infinity ? null : new Date(modified).toISOString(),
        StandardLookupValue: legacy !== undefined ? value : null,
      };
    })
    .sort((a, b) => ordinal(a.LookupKey, b.LookupKey));
}

const fixture = Object.fromEntries(DATA.map((r) => [r, readJsonl(DEFAULT_DATA_DIR, `${r}.jsonl`)])) as Record<(typeof DATA)[number], Rec[]>;
const all = (e: Engine, query = '', sources?: readonly string[]): Rec[] => {
  const out: Rec[] = [];
  let q = `$top=50000&${query}`;
  for (;;) {
    const page = e.query('Lookup', q, { sources });
    out.push(...page.value);
    const next = page['@odata.nextLink'];
    if (next === undefined) return out;
    q = next.slice(next.indexOf('?') + 1);
  }
};

const tmpDirs: string[] = [];
afterAll(() => tmpDirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

let engine: Engine;
beforeAll(async () => {
  engine = await Engine.open({ now: clock });
});

describe('Lookup of the default data set', () => {
  it('holds exactly the rows derived from the data files and the DD reference metadata, for every account', () => {
    const want = expectedRows(fixture);
    expect(want.length).toBeGreaterThan(500);
    expect(want.some((r) => r.StandardLookupValue === null)).toBe(true);
    expect(want.some((r) => r.LookupValue === 'Active Under Contract' && r.LegacyODataValue === 'ActiveUnderContract')).toBe(true);
    for (const sources of SOURCES) {
      const got = engine.query('Lookup', '$top=50000&$count=true', { sources });
      expect(got['@odata.count'], String(sources)).toBe(want.length);
      expect(got.value, String(sources)).toEqual(want);
    }
    expect(engine.schemaOf('Lookup').fields.map((f) => `${f.name} ${f.type}`)).toEqual([
      'LookupKey Edm.String',
      'LegacyODataValue Edm.String',
      'LookupName Edm.String',
      'LookupValue Edm.String',
      'ModificationTimestamp Edm.DateTimeOffset',
      'StandardLookupValue Edm.String',
    ]);
  });

  it("joins every value of every field $metadata annotates with a LookupName, on every resource, by the annotation's name", () => {
    const xml = metadataXml((r) => engine.schemaOf(r));
    const rows = new Set(all(engine).map((r) => `${r.LookupName as string}\u0000${r.LookupValue as string}`));
    let fields = 0;
    let checked = 0;
    for (const resource of DATA) {
      const type = xml.slice(xml.indexOf(`<EntityType Name="${resource}">`), xml.indexOf('</EntityType>', xml.indexOf(`<EntityType Name="${resource}">`)));
      for (const m of type.matchAll(/<Property Name="(\w+)" Type="[^"]+"><Annotation Term="RESO\.OData\.Metadata\.LookupName" String="([^"]+)"\/>/g)) {
        const [, field, name] = m;
        fields++;
        for (const r of fixture[resource]) {
          const v = r[field];
          for (const value of Array.isArray(v) ? v : [v]) {
            if (typeof value !== 'string') continue;
            checked++;
            if (!rows.has(`${name}\u0000${value}`)) throw new Error(`${resource}.${field} = '${value}' has no Lookup row named ${name}`);
          }
        }
      }
    }
    expect(fields).toBeGreaterThan(20);
    expect(checked).toBeGreaterThan(10_000);
    // one lookup shared by several fields (AreaSource, ...) is one row per value, not one per field
    const keys = all(engine, '$select=LookupKey').map((r) => r.LookupKey);
    expect(new Set(keys).size).toBe(keys.length);
  });

  it('takes every query option, as the naive oracle answers them, the same for every account', () => {
    const rows = expectedRows(fixture);
    const naive = new NaiveEngine(rows, NOW, 'LookupKey');
    const queries = [
      ["LookupName eq 'StandardStatus'", 'LookupValue'],
      ['StandardLookupValue eq null', 'ModificationTimestamp desc,LookupName'],
      ["startswith(LookupValue,'C') and LookupName in ('Appliances','Heating','Cooling','PropertyType')", 'LookupName desc,LookupValue'],
      ['ModificationTimestamp lt 2025-01-01T00:00:00Z or LegacyODataValue eq null', 'LookupValue desc'],
      ["contains(tolower(LookupValue),'pool') and LookupName ne 'View'", 'LegacyODataValue,LookupKey desc'],
    ];
    for (const [filter, orderby] of queries) {
      const parsed = parseQuery(`$filter=${filter}&$orderby=${orderby}`);
      const want = naive.query(parsed.filter, parsed.orderby);
      expect(want.length, filter).toBeGreaterThan(0);
      for (const sources of SOURCES) {
        const got = engine.query('Lookup', `$filter=${filter}&$orderby=${orderby}&$select=LookupKey&$count=true&$top=50000`, { sources });
        expect(
          got.value.map((r) => r.LookupKey),
          `${filter} ${String(sources)}`,
        ).toEqual(want);
        expect(got['@odata.count']).toBe(want.length);
        const paged = engine.query('Lookup', `$filter=${filter}&$orderby=${orderby}&$select=LookupKey,LookupValue&$skip=2&$top=3`, { sources });
        expect(paged.value.map((r) => r.LookupKey)).toEqual(want.slice(2, 5));
        expect(Object.keys(paged.value[0] ?? { LookupKey: 1, LookupValue: 1 })).toEqual(['LookupKey', 'LookupValue']);
      }
    }
    // $apply: values per lookup, as counted from the derivation
    const grouped = engine.query('Lookup', '$apply=groupby((LookupName),aggregate($count as n))&$orderby=LookupName&$top=1000', { sources: ['Nowhere'] });
    const counts = new Map<string, number>();
    for (const r of rows) counts.set(r.LookupName as string, (counts.get(r.LookupName as string) ?? 0) + 1);
    expect(grouped.value).toEqual([...counts].sort(([a], [b]) => ordinal(a, b)).map(([LookupName, n]) => ({ LookupName, n })));
    // pages like the other resources: 10 by default, a nextLink with a skiptoken, every row once
    const page = engine.query('Lookup', '$select=LookupKey');
    expect(page.value).toHaveLength(10);
    expect(page['@odata.nextLink']).toMatch(/^Lookup\?\$select=LookupKey&\$skip=10&\$skiptoken=/);
    expect(engine.query('Lookup', '$select=LookupKey&$top=37').value).toHaveLength(37);
    const paged: unknown[] = [];
    for (let q: string | undefined = '$select=LookupKey'; q !== undefined;) {
      const p = engine.query('Lookup', q, { maxPageSize: 97 });
      paged.push(...p.value.map((r) => r.LookupKey));
      const next = p['@odata.nextLink'];
      q = next === undefined ? undefined : next.slice(next.indexOf('?') + 1);
    }
    expect(paged).toEqual(rows.map((r) => r.LookupKey));
    // one row by key (engine.entity; the service's Lookup('K') comes with the generalized fetch by key)
    const one = rows.find((r) => r.LookupName === 'StandardStatus' && r.LookupValue === 'Pending')!;
    expect(engine.entity('Lookup', one.LookupKey as string, '$select=LookupValue,LegacyODataValue', { sources: ['Nowhere'] })).toEqual({
      LookupKey: one.LookupKey,
      LegacyODataValue: 'Pending',
      LookupValue: 'Pending',
    });
    expect(engine.entity('Lookup', 'no-such-key', '')).toBeNull();
    // a bad field is the binder's coded error
    expect(() => engine.query('Lookup', "$filter=ListPrice eq 'x'")).toThrow(QueryError);
  });
});

describe('Lookup follows changes', () => {
  const listing = (key: string, extra: Rec): Rec => ({ ...fixture.Property[0], ListingKey: key, ListingId: key, ...extra });

  it('lists a new value in the generation of the change that brings it, keeps it after its last record goes, and never changes the rows it has', async () => {
    const e = await Engine.open({ now: clock });
    const before = all(e);
    const pinned = e.query('Lookup', '$select=LookupKey&$count=true');
    expect(pinned['@odata.nextLink']).toBeDefined();
    const summary = await e.upsert('Property', [
      listing('LK-1', { Appliances: ['Quantum Toaster', 'Dishwasher'], ModificationTimestamp: '2025-05-30T10:00:00Z' }),
      listing('LK-2', { Appliances: ['Quantum Toaster'], ModificationTimestamp: '2025-05-29T08:30:00Z', StandardStatus: 'Active' }),
    ]);
    expect(summary.generation).toBe(e.generation);
    const after = all(e);
    const added = after.filter((r) => !before.some((b) => b.LookupKey === r.LookupKey));
    expect(added).toEqual([
      {
        LookupKey: keyOf('Appliances', 'Quantum Toaster'),
        LegacyODataValue: null,
        LookupName: 'Appliances',
        LookupValue: 'Quantum Toaster',
        ModificationTimestamp: '2025-05-29T08:30:00.000Z',
        StandardLookupValue: null,
      },
    ]);
    // every earlier row is as it was
    expect(after.filter((r) => r.LookupKey !== added[0].LookupKey)).toEqual(before);
    // the page pinned before the change reads the generation it started on: without the new row
    const next = pinned['@odata.nextLink']!;
    const rest = e.query('Lookup', next.slice(next.indexOf('?') + 1));
    expect(rest['@odata.count']).toBe(before.length);
    expect(rest.value.map((r) => r.LookupKey)).toEqual(before.slice(10, 20).map((r) => r.LookupKey));
    expect(e.query('Lookup', '$count=true&$top=0')['@odata.count']).toBe(before.length + 1);

    // removing its records keeps the value listed
    await e.remove('Property', ['LK-1', 'LK-2']);
    expect(all(e)).toEqual(after);
    // so does compaction
    await e.compact();
    expect(all(e)).toEqual(after);
    // and a later record with the value brings no second row, nor a new date
    await e.upsert('Property', [listing('LK-3', { Appliances: ['Quantum Toaster'], ModificationTimestamp: '2020-01-01T00:00:00Z' })]);
    expect(all(e)).toEqual(after);
  });

  it("a field new to a resource's schema brings its lookup's standard values; other resources' values count too", async () => {
    const e = await Engine.open({ now: clock });
    const has = (name: string): number => e.query('Lookup', `$filter=LookupName eq '${name}'&$count=true&$top=0`)['@odata.count']!;
    expect(engine.schemaOf('Property').field('AccessibilityFeatures')).toBeUndefined();
    expect(has('AccessibilityFeatures')).toBe(0);
    const a = listing('LK-A', { AccessibilityFeatures: ['Accessible Doors', 'Local Ramp Thing'] });
    const m = { ...fixture.Member[0], MemberKey: 'M-LK', MemberStatus: 'On Sabbatical', ModificationTimestamp: '2025-05-01T00:00:00Z' };
    await e.apply([
      { resource: 'Property', upsert: [a] },
      { resource: 'Member', upsert: [m] },
    ]);
    expect(has('AccessibilityFeatures')).toBe(ddStandard.get('AccessibilityFeatures')!.size + 1);
    const local = e.query('Lookup', "$filter=LookupValue eq 'Local Ramp Thing' or LookupValue eq 'On Sabbatical'&$orderby=LookupName");
    expect(local.value.map((r) => [r.LookupName, r.StandardLookupValue, r.LegacyODataValue])).toEqual([
      ['AccessibilityFeatures', null, null],
      ['MemberStatus', null, null],
    ]);
    // the same data loaded at once gives the same rows, which are the derivation's
    const data = {
      ...fixture,
      Property: [...fixture.Property, a],
      Member: [...fixture.Member, m],
    };
    const loaded = await Engine.open({ now: clock, data });
    expect(all(loaded)).toEqual(expectedRows(data));
    expect(all(e)).toEqual(all(loaded));
  });

  it('a failed change adds nothing; Lookup itself cannot be written', async () => {
    const e = await Engine.open({ now: clock });
    const before = all(e);
    await expect(
      e.apply([
        { resource: 'Property', upsert: [listing('LK-F', { Appliances: ['Never Seen'] })] },
        { resource: 'Media', upsert: [{ MediaKey: 'LK-M', ResourceName: 'Property', ResourceRecordKey: 'NO-SUCH-LISTING' }] },
      ]),
    ).rejects.toMatchObject({ code: 'MissingParent' });
    expect(all(e)).toEqual(before);
    expect(e.generation).toBe(0);
    await expect(e.upsert('Lookup', [{ LookupKey: 'x', LookupName: 'StandardStatus', LookupValue: 'Y' }])).rejects.toMatchObject({ code: 'ReadOnlyResource' });
    await expect(e.remove('Lookup', [before[0].LookupKey as string])).rejects.toMatchObject({ code: 'ReadOnlyResource' });
    await expect(Engine.open({ data: { Property: fixture.Property, Lookup: [] } as never })).rejects.toMatchObject({ code: 'UnknownResource' });
    // a later change with the same value adds it then
    await e.upsert('Property', [listing('LK-F', { Appliances: ['Never Seen'] })]);
    expect(all(e).length).toBe(before.length + 1);
  });
});

describe('snapshots', () => {
  it('keep the Lookup rows, those of changes too, and go on adding to them', async () => {
    const e = await Engine.open({ now: clock });
    await e.upsert('Property', [{ ...fixture.Property[1], ListingKey: 'LK-S', ListingId: 'LK-S', Heating: ['Peat Fire'] }]);
    const dir = mkdtempSync(path.join(os.tmpdir(), 'reso-lookup-'));
    tmpDirs.push(dir);
    const file = path.join(dir, 'snap.bin');
    e.save(file);
    const back = await Engine.open({ snapshot: file, now: clock });
    expect(all(back)).toEqual(all(e));
    expect(all(back).some((r) => r.LookupValue === 'Peat Fire')).toBe(true);
    for (const sources of SOURCES) {
      const q = "$filter=LookupName eq 'Heating'&$orderby=LookupValue desc&$count=true&$top=1000";
      expect(back.query('Lookup', q, { sources })).toEqual(e.query('Lookup', q, { sources }));
    }
    await back.upsert('Property', [{ ...fixture.Property[2], ListingKey: 'LK-T', ListingId: 'LK-T', Heating: ['Whale Oil'] }]);
    expect(all(back).length).toBe(all(e).length + 1);
  });
});
