/**
 * EntityEvent (DESIGN.md, "EntityEvent"): the log against a model of the events the changes
 * actually applied (one per record at load, then one per record each change writes, cascaded
 * children included, sequence strictly increasing from 1), replaying the events onto the loaded
 * data reproduces the engine's records, the log and the records are published together, an
 * account sees the events of its sources (removals included), `EntityEventSequence gt N` ordered
 * by it is a range over a sorted permutation walked to the page, and snapshots and compaction
 * keep the log.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Engine, EVENT_RETENTION_MS } from '../../src/engine.js';
import type { ChangeOperation } from '../../src/live/change.js';
import { dataSetOf, generated, rejectionOf, type Rec } from './helpers.js';

type Sourced = 'Property' | 'Media' | 'OpenHouse' | 'Member' | 'Office';
const KEYS: Record<Sourced, string> = { Property: 'ListingKey', Media: 'MediaKey', OpenHouse: 'OpenHouseKey', Member: 'MemberKey', Office: 'OfficeKey' };
const ORDER: readonly Sourced[] = ['Property', 'Media', 'OpenHouse', 'Member', 'Office'];
const NOW = Date.parse('2025-06-01T00:00:00Z');

interface Event {
  EntityEventSequence: number;
  ResourceName: string;
  ResourceRecordKey: string;
  ResourceRecordUrl: string;
  OriginatingSystemName: string | null;
}

/** The records the engine should hold, and the events it should have logged, written from the contract. */
class Model {
  readonly live: Record<Sourced, Map<string, Rec>> = { Property: new Map(), Media: new Map(), OpenHouse: new Map(), Member: new Map(), Office: new Map() };
  readonly events: Event[] = [];
  /** When each event was written (the engine clock), by position in `events`. */
  readonly written: number[] = [];

  constructor(
    data: Partial<Record<Sourced, Rec[]>>,
    private readonly clock: () => number = () => NOW,
  ) {
    for (const r of ORDER) for (const rec of data[r] ?? []) this.live[r].set(rec[KEYS[r]] as string, rec);
    for (const r of ORDER) for (const [key] of this.live[r]) this.log(r, key);
  }

  private listingOf(r: Sourced, rec: Rec): string | null {
    if (r === 'Media') return rec.ResourceName === 'Property' ? (rec.ResourceRecordKey as string) : null;
    if (r === 'OpenHouse') return rec.ListingKey as string;
    return null;
  }

  private sourceOf(r: Sourced, key: string): string | null {
    const rec = this.live[r].get(key)!;
    const listing = r === 'Media' || r === 'OpenHouse' ? this.listingOf(r, rec) : null;
    const own =
      r === 'Media' || r === 'OpenHouse' ? (listing === null ? undefined : this.live.Property.get(listing)?.OriginatingSystemName) : rec.OriginatingSystemName;
    return typeof own === 'string' ? own : null;
  }

  private log(r: Sourced, key: string): void {
    const n = (this.events.at(-1)?.EntityEventSequence ?? 0) + 1;
    const url = `${r}('${encodeURIComponent(key.replace(/'/g, "''"))}')`;
    this.written.push(this.clock());
    this.events.push({ EntityEventSequence: n, ResourceName: r, ResourceRecordKey: key, ResourceRecordUrl: url, OriginatingSystemName: this.sourceOf(r, key) });
  }

  /**
   * What compaction leaves of the log: the newest event of each record; of a record that is gone,
   * only while younger than the retention window; and the last event.
   */
  compact(nowMs: number, retentionMs: number): void {
    const newest = new Map<string, number>();
    this.events.forEach((e, i) => newest.set(`${e.ResourceName}/${e.ResourceRecordKey}`, i));
    const keep = new Set<number>([this.events.length - 1]);
    for (const i of newest.values()) {
      const e = this.events[i];
      if (this.live[e.ResourceName as Sourced].has(e.ResourceRecordKey) || nowMs - this.written[i] <= retentionMs) keep.add(i);
    }
    const kept = [...keep].sort((a, b) => a - b);
    const events = kept.map((i) => this.events[i]);
    const written = kept.map((i) => this.written[i]);
    this.events.splice(0, this.events.length, ...events);
    this.written.splice(0, this.written.length, ...written);
  }

  apply(ops: ChangeOperation[]): void {
    for (const op of ops) {
      const r = op.resource as Sourced;
      if ('remove' in op) {
        for (const key of op.remove) {
          if (!this.live[r].has(key)) continue;
          this.log(r, key);
          if (r === 'Property') {
            for (const c of ['Media', 'OpenHouse'] as const) {
              for (const [k, rec] of this.live[c]) {
                if (this.listingOf(c, rec) !== key) continue;
                this.log(c, k);
                this.live[c].delete(k);
              }
            }
          }
          this.live[r].delete(key);
        }
        continue;
      }
      if (!('upsert' in op)) throw new Error('the model takes upserts as lists of records');
      for (const rec of op.upsert as Rec[]) {
        const key = rec[KEYS[r]] as string;
        this.live[r].set(key, rec);
        this.log(r, key);
      }
    }
  }
}

/** Every event an engine shows the caller, paged through by sequence (`gt` the last one seen). */
function allEvents(engine: Engine, sources?: string[]): Event[] {
  const out: Event[] = [];
  let last = 0;
  for (;;) {
    const page = engine.query('EntityEvent', `$filter=EntityEventSequence gt ${last}&$orderby=EntityEventSequence&$top=500`, { sources })
      .value as unknown as Event[];
    if (page.length === 0) return out;
    out.push(...page);
    last = page[page.length - 1].EntityEventSequence;
  }
}

/** Every record of a resource the engine holds, by key. */
function recordsOf(engine: Engine, r: Sourced): Map<string, Rec> {
  const out = new Map<string, Rec>();
  for (let skip = 0; ; skip += 5000) {
    const page = engine.query(r, `$top=5000&$skip=${skip}`).value as Rec[];
    for (const rec of page) out.set(rec[KEYS[r]] as string, rec);
    if (page.length < 5000) return out;
  }
}

const LISTINGS = generated(60, 'entity-event', { mediaPerListing: 2 });
const DATA = {
  ...dataSetOf(LISTINGS.slice(0, 40)),
  Member: [
    { MemberKey: 'MB1', MemberFullName: 'Ann', OriginatingSystemName: 'HAR' },
    { MemberKey: 'MB2', MemberFullName: 'Bob', OriginatingSystemName: 'NWMLS' },
  ],
  Office: [{ OfficeKey: 'OF1', OfficeName: 'One', OriginatingSystemName: 'HAR' }],
};
const sourceOfListing = (i: number): string => LISTINGS[i].property.OriginatingSystemName as string;
const keyOf = (i: number): string => LISTINGS[i].property.ListingKey as string;

/** Changes of every kind: replacements, additions with children, child upserts, removals (cascading), roster changes, unknown keys. */
const CHANGES: ChangeOperation[][] = [
  [{ resource: 'Property', upsert: LISTINGS.slice(0, 5).map((l) => ({ ...l.property, ListPrice: 123456 })) }],
  [
    { resource: 'Property', upsert: LISTINGS.slice(40, 50).map((l) => l.property) },
    { resource: 'Media', upsert: LISTINGS.slice(40, 50).flatMap((l) => l.media) },
    { resource: 'OpenHouse', upsert: LISTINGS.slice(40, 50).flatMap((l) => l.openHouses) },
  ],
  [{ resource: 'Property', remove: [keyOf(6), keyOf(7), 'no-such-key', keyOf(41)] }],
  [
    { resource: 'Media', remove: LISTINGS[8].media.map((m) => m.MediaKey as string) },
    { resource: 'Member', upsert: [{ MemberKey: 'MB3', MemberFullName: "O'Neil", OriginatingSystemName: 'HAR' }] },
    { resource: 'Member', remove: ['MB2'] },
    { resource: 'OpenHouse', upsert: [{ OpenHouseKey: 'OH-new', ListingKey: keyOf(10), OpenHouseStartTime: '2025-06-07T10:00:00Z' }] },
    { resource: 'Office', upsert: [{ OfficeKey: 'OF1', OfficeName: 'Renamed', OriginatingSystemName: 'HAR' }] },
  ],
  [
    { resource: 'Property', remove: [keyOf(9)] },
    { resource: 'Property', upsert: [LISTINGS[9].property] },
  ],
];

describe('EntityEvent', () => {
  let engine: Engine;
  let model: Model;
  let loaded: Record<Sourced, Map<string, Rec>>;
  let dir: string;

  beforeAll(async () => {
    engine = await Engine.open({ data: structuredClone(DATA), now: () => new Date(NOW), compactFraction: false });
    model = new Model(structuredClone(DATA));
    loaded = Object.fromEntries(ORDER.map((r) => [r, recordsOf(engine, r)])) as Record<Sourced, Map<string, Rec>>;
    dir = mkdtempSync(path.join(tmpdir(), 'entity-event-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('the load logs one event per record, in resource then load order, numbered from 1', () => {
    const events = allEvents(engine);
    expect(events.length).toBe(40 + DATA.Media.length + DATA.OpenHouse.length + 3);
    expect(events).toEqual(model.events);
  });

  it('each change appends one event per record it writes (cascaded children included), in order; nothing for unknown keys or a failed change', async () => {
    for (const ops of CHANGES) {
      await engine.apply(ops);
      model.apply(ops);
      expect(allEvents(engine)).toEqual(model.events);
    }
    const before = allEvents(engine).length;
    const failed = await rejectionOf(
      engine.apply([
        { resource: 'Property', upsert: [LISTINGS[50].property] },
        { resource: 'Media', upsert: [{ MediaKey: 'X', ResourceName: 'Property', ResourceRecordKey: 'no-such-listing' }] },
      ]),
    );
    expect(failed).toBeDefined();
    expect(allEvents(engine).length).toBe(before);
    const seqs = allEvents(engine).map((e) => e.EntityEventSequence);
    for (let i = 1; i < seqs.length; i++) expect(seqs[i]).toBeGreaterThan(seqs[i - 1]);
  });

  it('EntityEvent replays to the same data: the loaded records, with each named record fetched by key after the events, are the engine records', () => {
    const replica = Object.fromEntries(ORDER.map((r) => [r, new Map(loaded[r])])) as Record<Sourced, Map<string, Rec>>;
    const loadEvents = 40 + DATA.Media.length + DATA.OpenHouse.length + 3;
    for (const e of allEvents(engine).filter((x) => x.EntityEventSequence > loadEvents)) {
      const r = e.ResourceName as Sourced;
      const found = engine.query(r, `$filter=${KEYS[r]} eq '${e.ResourceRecordKey.replace(/'/g, "''")}'`).value as Rec[];
      if (found.length === 1) replica[r].set(e.ResourceRecordKey, found[0]);
      else replica[r].delete(e.ResourceRecordKey);
    }
    for (const r of ORDER) expect(new Map([...replica[r]].sort()), r).toEqual(new Map([...recordsOf(engine, r)].sort()));
    // the changes did change every resource, so the replay had work to do
    for (const r of ORDER) expect(new Map([...loaded[r]].sort()), r).not.toEqual(new Map([...recordsOf(engine, r)].sort()));
  });

  it('an account sees the events of records in its sources, removals included', () => {
    for (const source of ['HAR', 'NWMLS']) {
      const seen = allEvents(engine, [source]);
      expect(seen).toEqual(model.events.filter((e) => e.OriginatingSystemName === source));
      expect(seen.length).toBeGreaterThan(0);
    }
    const removal = model.events.find((e) => e.ResourceRecordKey === keyOf(6) && e.EntityEventSequence > 100)!;
    expect(removal.OriginatingSystemName).toBe(sourceOfListing(6));
    expect(allEvents(engine, [sourceOfListing(6)])).toContainEqual(removal);
    expect(allEvents(engine, ['nobody'])).toEqual([]);
  });

  it('takes the query options: $select, $count, $filter on the record, $orderby desc, $apply, paging by nextLink', () => {
    const r = engine.query('EntityEvent', `$filter=ResourceName eq 'Member'&$select=ResourceRecordKey&$count=true&$orderby=EntityEventSequence desc`);
    const members = model.events.filter((e) => e.ResourceName === 'Member').reverse();
    expect(r['@odata.count']).toBe(members.length);
    expect(r.value).toEqual(members.map((e) => ({ EntityEventSequence: e.EntityEventSequence, ResourceRecordKey: e.ResourceRecordKey })));
    const groups = engine.query('EntityEvent', '$apply=groupby((ResourceName),aggregate($count as n))').value;
    expect(groups).toEqual(
      ORDER.map((name) => ({ ResourceName: name, n: model.events.filter((e) => e.ResourceName === name).length })).sort((a, b) =>
        a.ResourceName < b.ResourceName ? -1 : 1,
      ),
    );
    const first = engine.query('EntityEvent', '$top=15', { maxPageSize: 10 });
    expect(first.value).toEqual(model.events.slice(0, 10));
    expect(first['@odata.nextLink']).toContain('$skip=10');
    // the storage key is no field of the resource
    expect(() => engine.query('EntityEvent', `$filter=service_EntityEventKey eq '1'`)).toThrow(/no field 'service_EntityEventKey'/);
  });

  it('EntityEventSequence gt N ordered by it is a range over a sorted permutation walked to the page', () => {
    const plan = engine.explain('EntityEvent', '$filter=EntityEventSequence gt 100&$orderby=EntityEventSequence&$top=50', { format: 'json' });
    expect(plan.access).toEqual({ kind: 'range', field: 'EntityEventSequence' });
    expect(plan.strategy).toEqual({ kind: 'walk', field: 'EntityEventSequence', descending: false });
  });

  it('a change is published with its events: concurrent queries see both or neither', async () => {
    const look = () => ({ listings: engine.query('Property', '$count=true&$top=0')['@odata.count'], events: allEvents(engine).length });
    const before = look();
    const big = generated(1500, 'entity-event-big', { from: 100, mediaPerListing: 1 });
    const seen: Array<ReturnType<typeof look>> = [];
    let done = false;
    const running = engine
      .apply([
        { resource: 'Property', upsert: big.map((l) => l.property) },
        { resource: 'Media', upsert: big.flatMap((l) => l.media) },
      ])
      .finally(() => (done = true));
    while (!done) {
      await new Promise((resolve) => setImmediate(resolve));
      seen.push(look());
    }
    await running;
    const after = look();
    expect(after).toEqual({ listings: before.listings! + 1500, events: before.events + 1500 + big.flatMap((l) => l.media).length });
    expect(seen.length).toBeGreaterThan(2);
    for (const s of seen) expect([before, after]).toContainEqual(s);
    model.apply([
      { resource: 'Property', upsert: big.map((l) => l.property) },
      { resource: 'Media', upsert: big.flatMap((l) => l.media) },
    ]);
  });

  it('compaction keeps the newest event of each record (removals within the retention window), snapshots the log; the sequence goes on after them', async () => {
    const before = allEvents(engine).length;
    await engine.compact();
    model.compact(NOW, EVENT_RETENTION_MS);
    expect(allEvents(engine)).toEqual(model.events);
    expect(model.events.length).toBeLessThan(before);
    const file = path.join(dir, 'e.snapshot');
    engine.save(file);
    const reopened = await Engine.open({ snapshot: file, now: () => new Date(NOW) });
    expect(allEvents(reopened)).toEqual(model.events);
    const ops: ChangeOperation[] = [{ resource: 'Property', remove: [keyOf(0)] }];
    await reopened.apply(ops);
    model.apply(ops);
    expect(allEvents(reopened)).toEqual(model.events);
  });

  it('an event is found by its sequence (engine.entity, has, isVisible), by the source of the record it names', () => {
    const e = model.events[5];
    expect(engine.entity('EntityEvent', String(e.EntityEventSequence), '')).toEqual(e);
    expect(engine.entity('EntityEvent', String(e.EntityEventSequence), '$select=ResourceName')).toEqual({
      EntityEventSequence: e.EntityEventSequence,
      ResourceName: e.ResourceName,
    });
    expect(engine.isVisible('EntityEvent', String(e.EntityEventSequence), [e.OriginatingSystemName!])).toBe(true);
    expect(engine.isVisible('EntityEvent', String(e.EntityEventSequence), ['nobody'])).toBe(false);
    for (const bad of ['0', '-1', '05', '1.5', 'x', '', String(model.events.at(-1)!.EntityEventSequence + 1)]) {
      expect(engine.has('EntityEvent', bad), bad).toBe(false);
    }
  });

  it('EntityEvent cannot be written by a change', async () => {
    const e = await rejectionOf(engine.apply([{ resource: 'EntityEvent' as 'Property', upsert: [] }]));
    expect(e).toMatchObject({ code: 'InvalidChange' });
  });

  it('compaction drops the events of records removed longer ago than the retention window, never the newest event', async () => {
    const clock = { ms: NOW };
    const HOUR = 3600 * 1000;
    const small = { ...dataSetOf(LISTINGS.slice(0, 12)), Member: DATA.Member, Office: DATA.Office };
    const e = await Engine.open({ data: structuredClone(small), now: () => new Date(clock.ms), compactFraction: false, eventRetentionMs: 24 * HOUR });
    const m = new Model(structuredClone(small), () => clock.ms);
    const step = async (ops: ChangeOperation[], hours: number): Promise<void> => {
      clock.ms += hours * HOUR;
      await e.apply(ops);
      m.apply(ops);
    };
    await step([{ resource: 'Property', remove: [keyOf(0), keyOf(1)] }], 1); // removed 2 days before the compaction
    await step(
      [
        { resource: 'Property', upsert: [LISTINGS[2].property] },
        { resource: 'Member', remove: ['MB1'] },
      ],
      1,
    );
    await step([{ resource: 'Property', remove: [keyOf(3)] }], 47); // removed 1 hour before it: kept
    await step(
      [
        { resource: 'Property', remove: [keyOf(1)] },
        { resource: 'Office', remove: ['OF1'] },
      ],
      0,
    ); // unknown key: no event
    clock.ms += HOUR;
    await e.compact();
    m.compact(clock.ms, 24 * HOUR);
    const events = allEvents(e);
    expect(events).toEqual(m.events);
    const keys = events.map((x) => `${x.ResourceName}/${x.ResourceRecordKey}`);
    expect(keys).not.toContain(`Property/${keyOf(0)}`);
    expect(keys).not.toContain('Member/MB1');
    expect(keys).toContain(`Property/${keyOf(3)}`);
    expect(keys.filter((k) => k === `Property/${keyOf(2)}`)).toHaveLength(1);
    // the last event is kept even when old and a removal; the next sequence follows it
    clock.ms += 100 * HOUR;
    await e.compact();
    await step([{ resource: 'Property', upsert: [LISTINGS[4].property] }], 0);
    m.compact(clock.ms, 24 * HOUR);
    const after = allEvents(e);
    expect(after.at(-2)?.ResourceRecordKey).toBe('OF1');
    expect(after.at(-1)?.EntityEventSequence).toBe(after.at(-2)!.EntityEventSequence + 1);
  });
});
