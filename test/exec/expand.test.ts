/**
 * $expand (SERVICE.md §3): the engine's expansions against a naive reference written plainly here
 * (raw generated records grouped with a loop, Array.filter and sort) on the default data set, and
 * the rules on small hand-made record sets: default orders and key tie-breaks, nested options,
 * PreferredMedia, $ignorenulls, $select on the listing, visibility and coded errors.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { Engine, DEFAULT_DATA_DIR, type QueryResource } from '../../src/engine.js';
import { QueryError } from '../../src/errors.js';
import { handMadeData, keysOf, preferredMediaData } from './expand-data.js';

type Rec = Record<string, unknown>;
const NOW = Date.parse('2025-06-01T00:00:00Z');
const clock = (): Date => new Date(NOW);

const readJsonl = (name: string): Rec[] =>
  readFileSync(path.join(DEFAULT_DATA_DIR, `${name}.jsonl`), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Rec);

function errorOf(engine: Engine, q: string, resource: QueryResource = 'Property'): QueryError {
  try {
    engine.query(resource, q);
  } catch (e) {
    expect(e, q).toBeInstanceOf(QueryError);
    return e as QueryError;
  }
  throw new Error(`no error for ${q}`);
}

// ---------------------------------------------------------------------------------------------
// The naive reference
// ---------------------------------------------------------------------------------------------

type Nav = 'Media' | 'OpenHouse' | 'PropertyChange' | 'PreferredMedia';
type Child = 'Media' | 'OpenHouse' | 'PropertyChange';
type OrderKey = readonly [read: (r: Rec) => unknown, descending: boolean];

const CHILD_KEY: Record<Child, string> = { Media: 'MediaKey', OpenHouse: 'OpenHouseKey', PropertyChange: 'PropertyChangeKey' };
const ts = (v: unknown): number | null => (typeof v === 'string' ? Date.parse(v) : null);
const DEFAULT_ORDER: Record<Child, OrderKey[]> = {
  Media: [[(r) => r.Order ?? null, false]],
  OpenHouse: [[(r) => ts(r.OpenHouseStartTime), false]],
  PropertyChange: [[(r) => ts(r.ModificationTimestamp), true]],
};

/** null lowest, then numbers or strings (ordinal). */
function compareValues(a: unknown, b: unknown): number {
  const an = a === null || a === undefined;
  const bn = b === null || b === undefined;
  if (an || bn) return an && bn ? 0 : an ? -1 : 1;
  return (a as number) < (b as number) ? -1 : (a as number) > (b as number) ? 1 : 0;
}

function sortBy(rows: Rec[], keys: readonly OrderKey[], keyField: string): Rec[] {
  return [...rows].sort((x, y) => {
    for (const [read, desc] of keys) {
      const d = compareValues(read(x), read(y));
      if (d !== 0) return desc ? -d : d;
    }
    return compareValues(x[keyField], y[keyField]);
  });
}

interface RefExpand {
  readonly nav: Nav;
  /** Nested options as sent, e.g. `$filter=Order le 5;$top=3`. */
  readonly options?: string;
  /** The same $filter, $orderby, $select, $skip, $top in plain JS. */
  readonly filter?: (r: Rec) => boolean;
  readonly orderby?: readonly OrderKey[];
  readonly select?: readonly string[];
  readonly skip?: number;
  readonly top?: number;
}

const expandText = (items: readonly RefExpand[]): string => items.map((e) => (e.options ? `${e.nav}(${e.options})` : e.nav)).join(',');

class Reference {
  private readonly children: Record<Child, Map<string, Rec[]>>;

  constructor(
    data: { Media?: Rec[]; OpenHouse?: Rec[]; PropertyChange?: Rec[] },
    /** Field names of each child resource in the engine's schema order (what records carry). */
    private readonly fields: Record<Child, readonly string[]>,
  ) {
    this.children = { Media: new Map(), OpenHouse: new Map(), PropertyChange: new Map() };
    const add = (res: Child, parent: unknown, r: Rec): void => {
      if (typeof parent !== 'string') return;
      const list = this.children[res].get(parent) ?? [];
      list.push(r);
      this.children[res].set(parent, list);
    };
    for (const r of data.Media ?? []) if (r.ResourceName === 'Property') add('Media', r.ResourceRecordKey, r);
    for (const r of data.OpenHouse ?? []) add('OpenHouse', r.ListingKey, r);
    for (const r of data.PropertyChange ?? []) add('PropertyChange', r.ListingKey, r);
  }

  expand(listingKey: string, e: RefExpand, ignoreNulls: boolean): Rec[] {
    const res: Child = e.nav === 'PreferredMedia' ? 'Media' : e.nav;
    const key = CHILD_KEY[res];
    const all = this.children[res].get(listingKey) ?? [];
    const filter = e.filter ?? ((): boolean => true);
    let rows: Rec[];
    if (e.nav === 'PreferredMedia') {
      const isPhoto = (r: Rec): boolean => r.MediaCategory === undefined || r.MediaCategory === null || r.MediaCategory === 'Photo';
      const photos = sortBy(all.filter(isPhoto).filter(filter), DEFAULT_ORDER.Media, key);
      const first = photos.find((r) => r.PreferredPhotoYN === true) ?? photos[0];
      rows = first === undefined ? [] : [first, ...photos.filter((r) => r !== first).slice(0, 1)];
      if (e.orderby) rows = sortBy(rows, e.orderby, key);
    } else {
      rows = sortBy(all.filter(filter), e.orderby ?? DEFAULT_ORDER[res], key);
    }
    const skip = e.skip ?? 0;
    rows = rows.slice(skip, e.top === undefined ? undefined : skip + e.top);
    return rows.map((r) => {
      const out: Rec = {};
      for (const f of this.fields[res]) {
        if (e.select && f !== key && !e.select.includes(f)) continue;
        const v = r[f] ?? null;
        if (v === null && ignoreNulls) continue;
        out[f] = v;
      }
      return out;
    });
  }
}

const fieldsOf = (engine: Engine): Record<Child, string[]> => ({
  Media: engine.store.Media.schema.fields.map((f) => f.name),
  OpenHouse: engine.store.OpenHouse.schema.fields.map((f) => f.name),
  PropertyChange: engine.store.PropertyChange.schema.fields.map((f) => f.name),
});

// ---------------------------------------------------------------------------------------------
// Default data set against the reference
// ---------------------------------------------------------------------------------------------

describe('expansions agree with the naive reference on the default data set', () => {
  let engine: Engine;
  let ref: Reference;
  beforeAll(async () => {
    engine = await Engine.open({ now: clock });
    ref = new Reference({ Media: readJsonl('Media'), OpenHouse: readJsonl('OpenHouse'), PropertyChange: readJsonl('PropertyChange') }, fieldsOf(engine));
  });

  const num = (r: Rec, f: string): number | null => (typeof r[f] === 'number' ? r[f] : null);
  const cases: Array<{ name: string; items: RefExpand[]; ignoreNulls?: boolean; listing?: string }> = [
    {
      name: 'all four, default orders, every field',
      items: [{ nav: 'Media' }, { nav: 'OpenHouse' }, { nav: 'PropertyChange' }, { nav: 'PreferredMedia' }],
    },
    {
      name: 'nested $select/$filter/$orderby/$skip/$top on Media',
      items: [
        {
          nav: 'Media',
          options:
            "$select=MediaKey,Order,MediaCategory,ImageWidth;$filter=MediaCategory eq 'Photo' and Order le 10;$orderby=ImageWidth desc,Order;$skip=1;$top=4",
          select: ['MediaKey', 'Order', 'MediaCategory', 'ImageWidth'],
          filter: (r) => r.MediaCategory === 'Photo' && (num(r, 'Order') ?? Infinity) <= 10,
          orderby: [
            [(r) => num(r, 'ImageWidth'), true],
            [(r) => num(r, 'Order'), false],
          ],
          skip: 1,
          top: 4,
        },
      ],
    },
    {
      name: 'string orders tie by key; ascending timestamps; or-filters',
      items: [
        {
          nav: 'OpenHouse',
          options: '$select=OpenHouseType,OpenHouseStartTime;$orderby=OpenHouseType desc',
          select: ['OpenHouseType', 'OpenHouseStartTime'],
          orderby: [[(r) => r.OpenHouseType ?? null, true]],
        },
        {
          nav: 'PropertyChange',
          options: "$filter=FieldName eq 'ListPrice' or ChangeType eq 'Pending';$orderby=ModificationTimestamp;$top=3",
          filter: (r) => r.FieldName === 'ListPrice' || r.ChangeType === 'Pending',
          orderby: [[(r) => ts(r.ModificationTimestamp), false]],
          top: 3,
        },
        {
          nav: 'Media',
          options: '$orderby=MediaCategory,ImageHeight desc;$select=MediaCategory,ImageHeight;$top=6',
          orderby: [
            [(r) => r.MediaCategory ?? null, false],
            [(r) => num(r, 'ImageHeight'), true],
          ],
          select: ['MediaCategory', 'ImageHeight'],
          top: 6,
        },
      ],
    },
    {
      name: 'PreferredMedia with a nested $filter (a condition on candidates) and $select',
      items: [
        {
          nav: 'PreferredMedia',
          options: '$filter=ImageWidth ge 2000;$select=Order,PreferredPhotoYN',
          filter: (r) => (num(r, 'ImageWidth') ?? -Infinity) >= 2000,
          select: ['Order', 'PreferredPhotoYN'],
        },
      ],
    },
    {
      name: 'PreferredMedia $orderby/$top/$skip apply to the two photos; default-order nested $skip/$top',
      items: [
        { nav: 'PreferredMedia', options: '$orderby=Order desc;$top=1', orderby: [[(r) => num(r, 'Order'), true]], top: 1 },
        { nav: 'Media', options: '$skip=2;$top=3;$select=Order', select: ['Order'], skip: 2, top: 3 },
        { nav: 'PropertyChange', options: '$skip=1', skip: 1 },
        { nav: 'OpenHouse', options: '$filter=OpenHouseStartTime gt now()', filter: (r) => (ts(r.OpenHouseStartTime) ?? -Infinity) > NOW },
      ],
    },
    {
      name: '$ignorenulls=true inside expansions',
      items: [{ nav: 'Media' }, { nav: 'PropertyChange' }, { nav: 'PreferredMedia', options: '$skip=1', skip: 1 }],
      ignoreNulls: true,
    },
  ];

  for (const c of cases) {
    it(c.name, () => {
      let compared = 0;
      for (let skip = 0; skip < 2000; skip += 500) {
        const q = `$select=ListingKey&$top=300&$skip=${skip}&$expand=${expandText(c.items)}${c.ignoreNulls ? '&$ignorenulls=true' : ''}`;
        const got = engine.query('Property', q).value;
        expect(got.length).toBe(300);
        for (const rec of got) {
          const key = rec.ListingKey as string;
          const want: Rec = { ListingKey: key };
          for (const e of c.items) want[e.nav] = ref.expand(key, e, c.ignoreNulls === true);
          expect(rec, `${key}: ${q}`).toEqual(want);
          expect(Object.keys(rec)).toEqual(['ListingKey', ...c.items.map((e) => e.nav)]);
          compared++;
        }
      }
      expect(compared).toBe(1200);
    });
  }

  it('the comparison is not vacuous: children, several orders and both PreferredMedia cases occur', () => {
    const got = engine.query('Property', '$select=ListingKey&$top=2000&$expand=OpenHouse($select=OpenHouseKey),PreferredMedia($select=PreferredPhotoYN)').value;
    expect(got.filter((r) => (r.OpenHouse as Rec[]).length >= 2).length).toBeGreaterThan(10);
    expect(got.filter((r) => (r.PreferredMedia as Rec[])[0]?.PreferredPhotoYN === true).length).toBeGreaterThan(100);
    expect(got.filter((r) => (r.PreferredMedia as Rec[]).length === 2 && (r.PreferredMedia as Rec[])[0].PreferredPhotoYN !== true).length).toBeGreaterThan(100);
    expect(got.filter((r) => (r.PreferredMedia as Rec[]).length === 0).length).toBeGreaterThan(0);
  });

  it('expansions follow the listing order, paging and $filter of the request, and are deterministic', () => {
    const q =
      "$filter=StandardStatus eq 'Active'&$orderby=ListPrice desc&$top=25&$skip=5&$select=ListingKey,ListPrice&$expand=PreferredMedia($select=MediaURL),Media($top=2)";
    const a = engine.query('Property', q);
    const b = engine.query('Property', q);
    expect(JSON.stringify(a)).toBe(JSON.stringify(b));
    for (const rec of a.value) {
      expect(rec.PreferredMedia).toEqual(ref.expand(rec.ListingKey as string, { nav: 'PreferredMedia', select: ['MediaURL'] }, false));
      expect(rec.Media).toEqual(ref.expand(rec.ListingKey as string, { nav: 'Media', top: 2 }, false));
    }
  });

  it('the nextLink repeats the expansions with their nested options', () => {
    const q = "$select=ListingKey&$expand=Media($select=Order;$filter=MediaCategory eq 'Photo';$orderby=Order desc;$top=1),PreferredMedia($select=MediaKey)";
    const first = engine.query('Property', q);
    const link = first['@odata.nextLink']!;
    const next = engine.query('Property', decodeURIComponent(link.slice(link.indexOf('?') + 1)));
    expect(next.value).toEqual(engine.query('Property', `${q}&$skip=10`).value);
    expect((next.value[0].Media as Rec[])[0]).toEqual(
      ref.expand(
        next.value[0].ListingKey as string,
        {
          nav: 'Media',
          select: ['Order'],
          filter: (r) => r.MediaCategory === 'Photo',
          orderby: [[(r) => r.Order ?? null, true]],
          top: 1,
        },
        false,
      )[0],
    );
  });

  it('only children of visible listings, whatever the filter or page', () => {
    const properties = readJsonl('Property');
    const sourceOf = new Map(properties.map((p) => [p.ListingKey as string, p.OriginatingSystemName as string]));
    const sources = [...new Set(sourceOf.values())].slice(0, 1);
    for (const filter of ['', `&$filter=OriginatingSystemName ne '${sources[0]}'`, `&$filter=OriginatingSystemName eq '${sources[0]}' or ListingKey ne 'x'`]) {
      const got = engine.query(
        'Property',
        `$top=2000&$select=ListingKey${filter}&$expand=Media($select=ResourceRecordKey),OpenHouse($select=ListingKey),PropertyChange($select=ListingKey),PreferredMedia($select=ResourceRecordKey)`,
        { sources },
      ).value;
      for (const rec of got) {
        expect(sources).toContain(sourceOf.get(rec.ListingKey as string));
        for (const nav of ['Media', 'PreferredMedia'] as const) for (const m of rec[nav] as Rec[]) expect(m.ResourceRecordKey).toBe(rec.ListingKey);
        for (const nav of ['OpenHouse', 'PropertyChange'] as const) for (const m of rec[nav] as Rec[]) expect(m.ListingKey).toBe(rec.ListingKey);
      }
    }
    expect(engine.query('Property', '$top=50&$expand=Media', { sources: [] }).value).toEqual([]);
  });

  it('nested $top up to the child maximum, all children without it', () => {
    const one = "$filter=ListingKey eq 'P000000001'&$select=ListingKey";
    const all = engine.query('Property', `${one}&$expand=Media($top=25000),OpenHouse($top=50000),PropertyChange($top=50000)`).value[0];
    const none = engine.query('Property', `${one}&$expand=Media,OpenHouse,PropertyChange`).value[0];
    expect(all).toEqual(none);
    expect((none.Media as Rec[]).length).toBe(ref.expand('P000000001', { nav: 'Media' }, false).length);
    const zero = engine.query('Property', `${one}&$expand=Media($top=0),PreferredMedia($top=0)`).value[0];
    expect(zero).toEqual({ ListingKey: 'P000000001', Media: [], PreferredMedia: [] });
  });

  it('coded errors with option $expand and positions in its value', () => {
    const cases: Array<[string, string, number | undefined, RegExp, QueryResource?]> = [
      ['$expand=Media,Photos', 'UnknownExpand', 6, /'Photos'.*Media, OpenHouse, PropertyChange, PreferredMedia/],
      ['$expand=media', 'UnknownExpand', 0, /'media'/],
      ['$expand=Media($select=MediaKey,Nope)', 'UnknownField', 23, /Media has no field 'Nope'/],
      ['$expand=OpenHouse,PropertyChange($filter=ListPrice gt 5)', 'UnknownField', 33, /PropertyChange has no field 'ListPrice'/],
      ["$expand=Media($filter=Order eq 'one')", 'TypeMismatch', 14, /string/],
      ['$expand=OpenHouse($orderby=OpenHouseStartTime,Nope desc)', 'UnknownField', 38, /Nope/],
      ["$expand=Media($filter=search.text(KeywordSearchText,'pool'))", 'InvalidSearch', 14, /Property/],
      ['$expand=Media($orderby=relevance desc)', 'RelevanceWithoutSearch', 15, /search\.text/],
      ['$expand=Media($top=25001)', 'TopTooLarge', 0, /25000 for Media/],
      ['$expand=PreferredMedia($top=25001)', 'TopTooLarge', 0, /25000 for Media/],
      ['$expand=Media,OpenHouse($top=50001)', 'TopTooLarge', 6, /50000 for OpenHouse/],
      ['$expand=PropertyChange($top=50001)', 'TopTooLarge', 0, /50000 for PropertyChange/],
      ['$expand=Media,OpenHouse,Media($top=1)', 'RepeatedExpand', 16, /Media is expanded twice/],
      ['$expand=Media', 'UnknownExpand', 0, /Media has no navigation properties.*Property/, 'Media'],
      ['$expand=Media', 'UnknownExpand', 0, /OpenHouse has no navigation properties/, 'OpenHouse'],
    ];
    for (const [q, code, position, message, resource] of cases) {
      const err = errorOf(engine, q, resource);
      expect([err.code, err.option, err.position], q).toEqual([code, '$expand', position]);
      expect(err.message, q).toMatch(message);
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Hand-made record sets
// ---------------------------------------------------------------------------------------------

describe('PreferredMedia rules', () => {
  let engine: Engine;
  beforeAll(async () => {
    engine = await Engine.open({ now: clock, data: preferredMediaData() });
  });

  const preferred = (key: string, options = ''): string[] =>
    keysOf(engine.query('Property', `$filter=ListingKey eq '${key}'&$expand=PreferredMedia${options}`).value[0].PreferredMedia);

  it('preferred first, then the lowest Order', () => expect(preferred('L1')).toEqual(['L1-c', 'L1-a']));
  it('several preferred: the lowest Order among them', () => expect(preferred('L2')).toEqual(['L2-b', 'L2-a']));
  it('none preferred: the two lowest Orders', () => expect(preferred('L3')).toEqual(['L3-y', 'L3-z']));
  it('non-photo media are skipped, preferred or not', () => expect(preferred('L4')).toEqual(['L4-p4', 'L4-p3']));
  it('MediaCategory absent counts as a photo', () => expect(preferred('L5')).toEqual(['L5-p', 'L5-n']));
  it('equal Orders tie by MediaKey', () => expect(preferred('L6')).toEqual(['L6-a', 'L6-c']));
  it('one photo, no photo, no media', () => {
    expect(preferred('L7')).toEqual(['L7-only']);
    expect(preferred('L8')).toEqual([]);
    expect(preferred('L9')).toEqual([]);
  });
  it('a photo without Order is the lowest Order', () => expect(preferred('L10')).toEqual(['L10-p', 'L10-null']));
  it('never more than two', () => {
    for (const rec of engine.query('Property', '$top=20&$expand=PreferredMedia').value) expect((rec.PreferredMedia as Rec[]).length).toBeLessThanOrEqual(2);
  });
  it('nested $filter is a condition on the candidates', () => {
    expect(preferred('L2', "($filter=MediaKey ne 'L2-b')")).toEqual(['L2-d', 'L2-a']);
    expect(preferred('L1', '($filter=Order ge 2)')).toEqual(['L1-c', 'L1-b']);
    expect(preferred('L3', '($filter=Order gt 100)')).toEqual([]);
  });
  it('nested $orderby, $top, $skip and $select apply to the result', () => {
    expect(preferred('L1', '($orderby=Order)')).toEqual(['L1-a', 'L1-c']);
    expect(preferred('L1', '($top=1)')).toEqual(['L1-c']);
    expect(preferred('L1', '($skip=1)')).toEqual(['L1-a']);
    expect(preferred('L6', '($orderby=Order desc)')).toEqual(['L6-a', 'L6-c']);
    const rec = engine.query('Property', "$filter=ListingKey eq 'L1'&$select=ListingKey&$expand=PreferredMedia($select=Order)").value[0];
    expect(rec).toEqual({
      ListingKey: 'L1',
      PreferredMedia: [
        { MediaKey: 'L1-c', Order: 3 },
        { MediaKey: 'L1-a', Order: 1 },
      ],
    });
  });
  it('Media of another ResourceName are no expansion', () => {
    expect(keysOf(engine.query('Property', "$filter=ListingKey eq 'L1'&$expand=Media").value[0].Media)).toEqual(['L1-a', 'L1-b', 'L1-c']);
  });
});

describe('expansions on hand-made records', () => {
  let engine: Engine;
  beforeAll(async () => {
    engine = await Engine.open({ now: clock, data: handMadeData() });
  });
  const one = (key: string, q: string, sources?: string[]): Rec => engine.query('Property', `$filter=ListingKey eq '${key}'&${q}`, { sources }).value[0];

  it('default orders, nulls lowest, ties by the child key', () => {
    const rec = one('L1', '$expand=Media,OpenHouse,PropertyChange');
    expect(keysOf(rec.Media)).toEqual(['M-d', 'M-b', 'M-c', 'M-a']);
    // instants, not text: 12:00-05:00 (17:00Z) ties with 17:00Z (by key), 10:00-07:00 is 17:00Z too
    expect(keysOf(rec.OpenHouse)).toEqual(['O-0', 'O-1', 'O-2', 'O-3']);
    // descending by timestamp, ties by key ascending, the null timestamp last (nulls lowest)
    expect(keysOf(rec.PropertyChange)).toEqual(['C-z', 'C-a', 'C-b', 'C-n']);
  });

  it('nested $orderby ties by the child key, ascending in either direction', () => {
    expect(keysOf(one('L1', '$expand=Media($orderby=ImageWidth desc)').Media)).toEqual(['M-a', 'M-c', 'M-d', 'M-b']);
    expect(keysOf(one('L1', '$expand=Media($orderby=ImageWidth)').Media)).toEqual(['M-b', 'M-d', 'M-a', 'M-c']);
    expect(keysOf(one('L1', '$expand=Media($orderby=ImageWidth desc;$skip=1;$top=2)').Media)).toEqual(['M-c', 'M-d']);
    expect(keysOf(one('L1', '$expand=PropertyChange($orderby=FieldName desc,ModificationTimestamp)').PropertyChange)).toEqual(['C-n', 'C-z', 'C-a', 'C-b']);
  });

  it('nested $filter follows the null rules', () => {
    expect(keysOf(one('L1', '$expand=Media($filter=ImageWidth ne 800)').Media)).toEqual(['M-d', 'M-b']);
    expect(keysOf(one('L1', '$expand=Media($filter=ImageWidth lt 10000)').Media)).toEqual(['M-d', 'M-c', 'M-a']);
    expect(keysOf(one('L1', '$expand=OpenHouse($filter=OpenHouseStartTime eq 2025-06-07T17:00:00Z)').OpenHouse)).toEqual(['O-1', 'O-2', 'O-3']);
    expect(keysOf(one('L1', "$expand=PropertyChange($filter=not (FieldName eq 'ListPrice') and ModificationTimestamp ne null)").PropertyChange)).toEqual([
      'C-z',
    ]);
  });

  it('nested $select: the child key always, fields in the child schema order', () => {
    const rec = one('L1', '$select=ListingKey&$expand=OpenHouse($select=OpenHouseStartTime,ListingKey;$top=2)');
    expect(rec).toEqual({
      ListingKey: 'L1',
      OpenHouse: [
        { OpenHouseKey: 'O-0', ListingKey: 'L1', OpenHouseStartTime: null },
        { OpenHouseKey: 'O-1', ListingKey: 'L1', OpenHouseStartTime: '2025-06-07T12:00:00-05:00' },
      ],
    });
    expect(Object.keys((rec.OpenHouse as Rec[])[0])).toEqual(['OpenHouseKey', 'ListingKey', 'OpenHouseStartTime']);
    expect(one('L1', '$select=ListingKey&$expand=Media($select=*;$top=1)').Media).toEqual([
      { MediaKey: 'M-d', ImageWidth: 640, MediaCategory: 'Photo', Order: 1, PreferredPhotoYN: null, ResourceName: 'Property', ResourceRecordKey: 'L1' },
    ]);
  });

  it('$ignorenulls=true drops null fields inside expansions too', () => {
    const rec = one('L1', '$select=ListingKey&$ignorenulls=true&$expand=OpenHouse($select=OpenHouseStartTime,OpenHouseRemarks)');
    expect(rec).toEqual({
      ListingKey: 'L1',
      OpenHouse: [
        { OpenHouseKey: 'O-0' },
        { OpenHouseKey: 'O-1', OpenHouseStartTime: '2025-06-07T12:00:00-05:00' },
        { OpenHouseKey: 'O-2', OpenHouseStartTime: '2025-06-07T17:00:00Z' },
        { OpenHouseKey: 'O-3', OpenHouseStartTime: '2025-06-07T10:00:00-07:00', OpenHouseRemarks: 'Cookies' },
      ],
    });
    const keep = one('L1', '$select=ListingKey&$expand=OpenHouse($select=OpenHouseRemarks;$top=1)');
    expect(keep.OpenHouse).toEqual([{ OpenHouseKey: 'O-0', OpenHouseRemarks: null }]);
  });

  it('expansions come after the listing fields, in request order, even when $select omits them', () => {
    const rec = one('L1', '$select=ListPrice&$expand=PropertyChange($top=1),Media($top=0),OpenHouse($top=1;$select=OpenHouseKey)');
    expect(Object.keys(rec)).toEqual(['ListingKey', 'ListPrice', 'PropertyChange', 'Media', 'OpenHouse']);
    const full = one('L1', '$expand=PreferredMedia');
    expect(Object.keys(full).at(-1)).toBe('PreferredMedia');
    expect(Object.keys(full).length).toBe(Object.keys(one('L1', '')).length + 1);
  });

  it('a listing without children gets empty arrays', () => {
    expect(one('L2', '$select=ListingKey&$expand=Media,OpenHouse,PreferredMedia,PropertyChange($top=0)')).toEqual({
      ListingKey: 'L2',
      Media: [],
      OpenHouse: [],
      PreferredMedia: [],
      PropertyChange: [],
    });
  });

  it('only children of visible listings', () => {
    const all = engine.query('Property', '$select=ListingKey&$expand=Media,OpenHouse,PreferredMedia', { sources: ['A'] }).value;
    expect(all.map((r) => r.ListingKey)).toEqual(['L1', 'L2', 'L4']);
    const shown = all.flatMap((r) => [...keysOf(r.Media), ...keysOf(r.OpenHouse), ...keysOf(r.PreferredMedia)]);
    expect(shown).not.toContain('M-hidden');
    expect(shown).not.toContain('O-h');
    expect(
      engine.query('Property', "$filter=ListingKey eq 'L3' or ListingKey ne 'x'&$expand=Media", { sources: ['A'] }).value.map((r) => r.ListingKey),
    ).toEqual(['L1', 'L2', 'L4']);
    expect(engine.query('Property', "$filter=ListingKey eq 'L3'&$expand=Media", { sources: ['A'] }).value).toEqual([]);
    expect(keysOf(one('L3', '$expand=Media', ['B']).Media)).toEqual(['M-hidden']);
  });

  it('nested errors against the child schema of this data set', () => {
    // PropertyChange records here carry no NewValue, so it is not a field of this data set
    const err = errorOf(engine, '$expand=PropertyChange($select=NewValue)');
    expect([err.code, err.option, err.position]).toEqual(['UnknownField', '$expand', 23]);
  });
});
