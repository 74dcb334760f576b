/**
 * EntityEvent over HTTP: the collection against the default data set's files (one event per
 * record of Property, Media, OpenHouse, Member and Office, each account seeing those of its
 * sources), the events of an admin's writes (removals and cascaded children included) seen by
 * the accounts of that source only, paging by nextLink, and coded errors (the storage key is no
 * field, the log is not writable).
 */
import { describe, expect, it } from 'vitest';
import { Engine } from '../../src/engine.js';
import { hashPassword } from '../../src/generate/dataset.js';
import { createHandler } from '../../src/service/handler.js';
import { call, DEMO_SOURCES, expectErrorShape, login, NOW, PARTNER_SOURCES, q, quickAccounts, TestClock, readDefaultFile } from './helpers.js';

type Rec = Record<string, unknown>;
const DATA = '/v1/listings/data';
const read = readDefaultFile;

/** Every record's event (resource, key, source) as the files say, in load order. */
function fileEvents(): Array<{ resource: string; key: string; source: string | null }> {
  const listings = read('Property.jsonl');
  const sourceOf = new Map(listings.map((l) => [l.ListingKey as string, l.OriginatingSystemName as string]));
  const media = read('Media.jsonl');
  const openHouses = read('OpenHouse.jsonl');
  return [
    ...listings.map((l) => ({ resource: 'Property', key: l.ListingKey as string, source: l.OriginatingSystemName as string })),
    ...media.map((m) => ({ resource: 'Media', key: m.MediaKey as string, source: sourceOf.get(m.ResourceRecordKey as string) ?? null })),
    ...openHouses.map((o) => ({ resource: 'OpenHouse', key: o.OpenHouseKey as string, source: sourceOf.get(o.ListingKey as string) ?? null })),
    ...read('Member.jsonl').map((m) => ({ resource: 'Member', key: m.MemberKey as string, source: m.OriginatingSystemName as string })),
    ...read('Office.jsonl').map((o) => ({ resource: 'Office', key: o.OfficeKey as string, source: o.OriginatingSystemName as string })),
  ];
}

async function world() {
  const engine = await Engine.open({ now: () => new Date(NOW) });
  const salt = Buffer.from('admin'.padEnd(16, '.'));
  const accounts = {
    accounts: [
      ...quickAccounts().accounts,
      { username: 'admin', password_hash: hashPassword('admin-password', salt, 1024, 8, 1), sources: [...DEMO_SOURCES], admin: true },
    ],
  };
  const handler = createHandler({ engine, accounts, clock: new TestClock().now, onError: () => undefined });
  return { engine, handler, admin: await login(handler, 'admin'), demo: await login(handler, 'demo'), partner: await login(handler, 'partner') };
}

describe('GET /v1/listings/data/EntityEvent', () => {
  it("answers each account the load's events of its sources, paged by nextLink", async () => {
    const w = await world();
    const all = fileEvents();
    for (const [token, sources] of [
      [w.demo, DEMO_SOURCES],
      [w.partner, PARTNER_SOURCES],
    ] as const) {
      const expected = all.map((e, i) => ({ ...e, sequence: i + 1 })).filter((e) => e.source !== null && sources.includes(e.source));
      const c = await call(w.handler, `${DATA}/EntityEvent?${q({ $count: 'true', $top: 0 })}`, { token });
      expect(c.status, c.text).toBe(200);
      expect(c.json['@odata.count']).toBe(expected.length);
      // the first pages through nextLink (the service's page size), then the rest by sequence
      const seen: Rec[] = [];
      let next: string | undefined = `${DATA}/EntityEvent?${q({ $filter: 'EntityEventSequence gt 0', $orderby: 'EntityEventSequence' })}`;
      for (let pages = 0; next !== undefined && pages < 3; pages++) {
        const page = await call(w.handler, next, { token });
        expect(page.status, page.text).toBe(200);
        expect(page.json['@odata.context']).toBe('http://service.test/v1/listings/data/$metadata#EntityEvent');
        seen.push(...(page.json.value as Rec[]));
        next = page.json['@odata.nextLink'] as string | undefined;
      }
      expect(seen.length).toBeGreaterThan(0);
      expect(seen).toEqual(
        expected.slice(0, seen.length).map((e) => ({
          EntityEventSequence: e.sequence,
          OriginatingSystemName: e.source,
          ResourceName: e.resource,
          ResourceRecordKey: e.key,
          ResourceRecordUrl: `${e.resource}('${encodeURIComponent(e.key.replace(/'/g, "''"))}')`,
        })),
      );
    }
  });

  it("an admin's removal logs the listing and its children, seen by the accounts of its source only", async () => {
    const w = await world();
    const listing = read('Property.jsonl').find(
      (l) => l.OriginatingSystemName === 'HAR' && read('Media.jsonl').some((m) => m.ResourceRecordKey === l.ListingKey),
    )!;
    const key = listing.ListingKey as string;
    const children = [
      ...read('Media.jsonl')
        .filter((m) => m.ResourceRecordKey === key)
        .map((m) => ['Media', m.MediaKey]),
      ...read('OpenHouse.jsonl')
        .filter((o) => o.ListingKey === key)
        .map((o) => ['OpenHouse', o.OpenHouseKey]),
    ];
    const loaded = fileEvents().length;
    const del = await call(w.handler, `${DATA}/Property('${key}')`, { method: 'DELETE', token: w.admin });
    expect(del.status, del.text).toBe(204);
    const newer = `${DATA}/EntityEvent?${q({ $filter: `EntityEventSequence gt ${loaded}`, $orderby: 'EntityEventSequence', $select: 'ResourceName,ResourceRecordKey' })}`;
    const demo = await call(w.handler, newer, { token: w.demo });
    // Media and OpenHouse each in their listing's order of the child lists
    const got = (demo.json.value as Rec[]).map((e) => [e.ResourceName, e.ResourceRecordKey]);
    expect(got[0]).toEqual(['Property', key]);
    expect(got.slice(1).sort()).toEqual([...children].sort());
    expect((demo.json.value as Rec[]).map((e) => e.EntityEventSequence)).toEqual(got.map((_, i) => loaded + 1 + i));
    // partner shares HAR: it sees the removal too; an account without HAR would not
    expect((await call(w.handler, newer, { token: w.partner })).json.value).toEqual(demo.json.value);
    const other = await call(
      w.handler,
      `${DATA}/EntityEvent?${q({ $filter: `EntityEventSequence gt ${loaded} and OriginatingSystemName ne 'HAR'`, $count: 'true' })}`,
      {
        token: w.demo,
      },
    );
    expect(other.json['@odata.count']).toBe(0);
  });

  it('refuses writes to the log and queries of its storage key with coded errors', async () => {
    const w = await world();
    const post = await call(w.handler, `${DATA}/EntityEvent`, { method: 'POST', token: w.admin, headers: { 'content-type': 'application/json' }, body: '[]' });
    expectErrorShape(post, 405, 'MethodNotAllowed');
    expect(post.headers.get('allow')).toBe('GET, HEAD');
    const changes = await call(w.handler, `${DATA}/$changes`, {
      method: 'POST',
      token: w.admin,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ operations: [{ resource: 'EntityEvent', remove: ['1'] }] }),
    });
    expectErrorShape(changes, 400, 'InvalidChange');
    expectErrorShape(await call(w.handler, `${DATA}/EntityEvent?${q({ $orderby: 'service_EntityEventKey' })}`, { token: w.demo }), 400, 'UnknownField');
    expectErrorShape(
      await call(w.handler, `${DATA}/EntityEvent?${q({ $filter: 'EntityEventSequence gt 1', $expand: 'Media' })}`, { token: w.demo }),
      400,
      'UnknownExpand',
    );
    expect(w.engine.generation).toBe(0);
  });
});

describe('EntityEvent by key', () => {
  it('EntityEvent(N) and EntityEvent(EntityEventSequence=N) answer the event its source sees; others are 404s, bad keys 400s, no deletes', async () => {
    const w = await world();
    const events = fileEvents();
    // events are numbered from 1 in load order: the files say which record each names
    const firstOf = (pred: (e: { source: string | null }) => boolean): number => events.findIndex(pred) + 1;
    const partnerOnly = firstOf((e) => e.source !== null && PARTNER_SOURCES.includes(e.source) && !DEMO_SOURCES.includes(e.source));
    const demoOnly = firstOf((e) => e.source !== null && DEMO_SOURCES.includes(e.source) && !PARTNER_SOURCES.includes(e.source));
    expect(partnerOnly).toBeGreaterThan(0);
    expect(demoOnly).toBeGreaterThan(0);
    for (const form of [`EntityEvent(${demoOnly})`, `EntityEvent(EntityEventSequence=${demoOnly})`, `EntityEvent(00${demoOnly})`]) {
      const c = await call(w.handler, `${DATA}/${form}`, { token: w.demo });
      expect(c.status, c.text).toBe(200);
      const e = events[demoOnly - 1];
      expect(c.json).toMatchObject({ EntityEventSequence: demoOnly, ResourceName: e.resource, ResourceRecordKey: e.key, OriginatingSystemName: e.source });
      expect(c.json['@odata.context']).toMatch(/\$metadata#EntityEvent\/\$entity$/);
    }
    expectErrorShape(await call(w.handler, `${DATA}/EntityEvent(${partnerOnly})`, { token: w.demo }), 404, 'EntityNotFound');
    expectErrorShape(await call(w.handler, `${DATA}/EntityEvent(${events.length + 1})`, { token: w.demo }), 404, 'EntityNotFound');
    expectErrorShape(await call(w.handler, `${DATA}/EntityEvent('${demoOnly}')`, { token: w.demo }), 400, 'InvalidKey');
    expectErrorShape(await call(w.handler, `${DATA}/EntityEvent(-1)`, { token: w.demo }), 400, 'InvalidKey');
    expectErrorShape(await call(w.handler, `${DATA}/EntityEvent(ResourceRecordKey='x')`, { token: w.demo }), 400, 'UnknownKeyProperty');
    expectErrorShape(await call(w.handler, `${DATA}/EntityEvent(${demoOnly})`, { token: w.admin, method: 'DELETE' }), 405, 'MethodNotAllowed');
  });
});
