/**
 * Writes over HTTP (DESIGN.md "Writes over HTTP"): only sessions of admin accounts, only inside
 * their sources. Every test that writes gets its own engine (the default data set at the fixed
 * clock), so tests do not see each other's changes.
 */
import { describe, expect, it } from 'vitest';
import { Engine } from '../../src/engine.js';
import { hashPassword } from '../../src/generate/dataset.js';
import { createHandler, type Handler, type HandlerOptions } from '../../src/service/handler.js';
import { DEFAULT_LIMITS } from '../../src/service/request.js';
import { call, DEMO_SOURCES, expectErrorShape, login, NOW, q, quickAccounts, TestClock, type Call, readDefaultFile } from './helpers.js';

type Rec = Record<string, unknown>;
const DATA = '/v1/listings/data';
const read = readDefaultFile;
const listings = read('Property.jsonl');
const media = read('Media.jsonl');
const openHouses = read('OpenHouse.jsonl');
const mediaOf = (key: string): Rec[] => media.filter((m) => m.ResourceRecordKey === key);
/** A CRMLS listing with media and open houses, and an NWMLS listing with media (another source). */
const ours = listings.find(
  (l) => l.OriginatingSystemName === 'CRMLS' && mediaOf(l.ListingKey as string).length > 0 && openHouses.some((o) => o.ListingKey === l.ListingKey),
)!;
const OURS = ours.ListingKey as string;
const theirs = listings.find((l) => l.OriginatingSystemName === 'NWMLS' && mediaOf(l.ListingKey as string).length > 0)!;
const THEIRS = theirs.ListingKey as string;
const ourMedia = mediaOf(OURS);
const theirMedia = mediaOf(THEIRS);
const ourOpenHouse = openHouses.find((o) => o.ListingKey === OURS)!;
const crmlsCount = listings.filter((l) => l.OriginatingSystemName === 'CRMLS').length;

/** A new CRMLS listing (a copy of `ours` under another key). */
const newListing = (key: string, extra: Rec = {}): Rec => ({ ...ours, ListingKey: key, ListingId: `ID-${key}`, ...extra });
const newMedia = (key: string, listing: string, extra: Rec = {}): Rec => ({ ...ourMedia[0], MediaKey: key, ResourceRecordKey: listing, ...extra });

const salt = (s: string): Buffer => Buffer.from(s.padEnd(16, '.'));
/** demo and partner (not admins), `admin` (demo's sources) and `crmls` (an admin of CRMLS only). */
function accounts(): { accounts: Rec[] } {
  return {
    accounts: [
      ...quickAccounts().accounts,
      { username: 'admin', password_hash: hashPassword('admin-password', salt('admin'), 1024, 8, 1), sources: [...DEMO_SOURCES], admin: true },
      { username: 'crmls', password_hash: hashPassword('crmls-password', salt('crmls'), 1024, 8, 1), sources: ['CRMLS'], admin: true },
    ],
  };
}

interface World {
  readonly engine: Engine;
  readonly handler: Handler;
  readonly admin: string;
  readonly crmls: string;
  readonly demo: string;
}

/** A fresh engine, a handler on it and tokens of the admins and of demo. */
async function world(options: Partial<HandlerOptions> = {}): Promise<World> {
  const engine = await Engine.open({ now: () => new Date(NOW) });
  const handler = createHandler({ engine, accounts: accounts(), clock: new TestClock().now, onError: () => undefined, ...options });
  return { engine, handler, admin: await login(handler, 'admin'), crmls: await login(handler, 'crmls'), demo: await login(handler, 'demo') };
}

const JSON_HEADERS = { 'content-type': 'application/json' };
const post = (w: World, p: string, body: unknown, token = w.admin, headers: Record<string, string> = JSON_HEADERS): Promise<Call> =>
  call(w.handler, `${DATA}/${p}`, { method: 'POST', token, headers, body: typeof body === 'string' ? body : JSON.stringify(body) });
const del = (w: World, p: string, token = w.admin): Promise<Call> => call(w.handler, `${DATA}/${p}`, { method: 'DELETE', token });
const get = (w: World, p: string, token = w.demo): Promise<Call> => call(w.handler, `${DATA}/${p}`, { token });
const count = async (w: World, resource: string, filter: string, token = w.demo): Promise<number> => {
  const c = await get(w, `${resource}?${q({ $filter: filter, $count: 'true', $top: 0 })}`, token);
  expect(c.status, c.text).toBe(200);
  return c.json['@odata.count'] as number;
};
const summary = (generation: number, upserted: number, removed: number, notFound: number) => ({ generation, upserted, removed, notFound });

/** 400 with the code, and the engine left exactly as it was. */
async function refused(w: World, c: Call, code: string): Promise<void> {
  expectErrorShape(c, 400, code);
  expect(w.engine.generation).toBe(0);
}

describe('accounts.json admin flag', () => {
  it('takes an optional boolean; anything else fails createHandler like the other shape checks', async () => {
    const engine = await Engine.open({ now: () => new Date(NOW) });
    const base = quickAccounts().accounts[0];
    expect(() => createHandler({ engine, accounts: { accounts: [{ ...base, admin: 'yes' }] } })).toThrow(/admin flag of 'demo' must be true or false/);
    expect(() => createHandler({ engine, accounts: { accounts: [{ ...base, admin: 1 }] } })).toThrow(TypeError);
    expect(() => createHandler({ engine, accounts: { accounts: [{ ...base, admin: null }] } })).toThrow(TypeError);
    expect(() => createHandler({ engine, accounts: { accounts: [{ ...base, admin: false }] } })).not.toThrow();
    expect(DEFAULT_LIMITS.maxWriteBodyBytes).toBe(64 * 1024 * 1024);
  });
});

describe('admin writes round trip through GET', () => {
  it('upserts a new listing (array body), visible to every account of its source with counts', async () => {
    const w = await world();
    const c = await post(w, 'Property', [newListing('W-1', { City: 'Writeville' })]);
    expect(c.status, c.text).toBe(200);
    expect(c.json).toEqual(summary(1, 1, 0, 0));
    expect(c.text).toBe('{"generation":1,"upserted":1,"removed":0,"notFound":0}');
    expect(c.headers.get('odata-version')).toBe('4.01');
    expect(c.headers.get('content-type')).toContain('application/json');
    expect(await count(w, 'Property', "City eq 'Writeville'")).toBe(1);
    expect(await count(w, 'Property', "OriginatingSystemName eq 'CRMLS'")).toBe(crmlsCount + 1);
    const one = await get(w, `Property('W-1')?$select=ListingKey,City,OriginatingSystemName`);
    expect(one.status).toBe(200);
    expect(one.json).toMatchObject({ ListingKey: 'W-1', City: 'Writeville', OriginatingSystemName: 'CRMLS' });
    // partner does not see CRMLS
    const partner = await login(w.handler, 'partner');
    expectErrorShape(await get(w, `Property('W-1')`, partner), 404, 'EntityNotFound');
  });

  it('replaces a listing ({"value": [...]} body): the new version, the same count, its children kept', async () => {
    const w = await world();
    const before = await count(w, 'Property', 'true');
    const c = await post(w, 'Property', { '@odata.context': 'ignored', value: [{ ...ours, ListPrice: 123_456 }] });
    expect(c.status, c.text).toBe(200);
    expect(c.json).toEqual(summary(1, 1, 0, 0));
    expect(await count(w, 'Property', 'true')).toBe(before);
    const one = await get(w, `Property('${OURS}')?$select=ListPrice&$expand=Media($select=MediaKey)`);
    expect(one.json.ListPrice).toBe(123_456);
    expect((one.json.Media as Rec[]).map((m) => m.MediaKey).sort()).toEqual(ourMedia.map((m) => m.MediaKey).sort());
  });

  it('upserts children: $expand and the child collections show them', async () => {
    const w = await world();
    const m = await post(w, 'Media', [newMedia('W-M1', OURS, { Order: 0, MediaURL: 'https://media.example.com/w/1.jpg' })]);
    expect(m.status, m.text).toBe(200);
    expect(m.json).toEqual(summary(1, 1, 0, 0));
    const o = await post(w, 'OpenHouse', { value: [{ ...ourOpenHouse, OpenHouseKey: 'W-OH1', OpenHouseType: 'Private' }] });
    expect(o.json).toEqual(summary(2, 1, 0, 0));
    const one = await get(w, `Property('${OURS}')?$select=ListingKey&$expand=Media($select=MediaKey,MediaURL;$top=1),OpenHouse($select=OpenHouseKey)`);
    expect(one.json.Media).toEqual([{ MediaKey: 'W-M1', MediaURL: 'https://media.example.com/w/1.jpg' }]); // Order 0 comes first
    expect((one.json.OpenHouse as Rec[]).map((x) => x.OpenHouseKey)).toContain('W-OH1');
    expect(await count(w, 'Media', `ResourceRecordKey eq '${OURS}'`)).toBe(ourMedia.length + 1);
    expect(await count(w, 'OpenHouse', "OpenHouseKey eq 'W-OH1'")).toBe(1);
  });

  it('DELETE removes a listing with its children (204, then 404), and children by key', async () => {
    const w = await world();
    const c = await del(w, `Property('${OURS}')`);
    expect(c.status).toBe(204);
    expect(c.text).toBe('');
    expect(c.headers.get('odata-version')).toBe('4.01');
    expectErrorShape(await get(w, `Property('${OURS}')`), 404, 'EntityNotFound');
    expect(await count(w, 'Property', "OriginatingSystemName eq 'CRMLS'")).toBe(crmlsCount - 1);
    expect(await count(w, 'Media', `ResourceRecordKey eq '${OURS}'`)).toBe(0);
    expect(await count(w, 'OpenHouse', `ListingKey eq '${OURS}'`)).toBe(0);
    const again = await del(w, `Property('${OURS}')`);
    expectErrorShape(again, 404, 'EntityNotFound');
    expect(again.json.error.message).toBe(`No listing with ListingKey '${OURS}' is visible to this account.`);

    const other = listings.find((l) => l.OriginatingSystemName === 'CRMLS' && l.ListingKey !== OURS && mediaOf(l.ListingKey as string).length > 1)!;
    const mk = mediaOf(other.ListingKey as string)[0].MediaKey as string;
    expect((await del(w, `Media(MediaKey='${mk}')`)).status).toBe(204);
    expect(await count(w, 'Media', `MediaKey eq '${mk}'`)).toBe(0);
    expect(await count(w, 'Media', `ResourceRecordKey eq '${other.ListingKey as string}'`)).toBe(mediaOf(other.ListingKey as string).length - 1);
    expectErrorShape(await del(w, `Media('${mk}')`), 404, 'EntityNotFound');
    expectErrorShape(await del(w, "OpenHouse('no-such-key')"), 404, 'EntityNotFound');
    expectErrorShape(await del(w, 'Property(5)'), 400, 'InvalidKey');
  });

  it('$changes applies several operations as one change', async () => {
    const w = await world();
    const c = await post(w, '$changes', {
      operations: [
        { resource: 'Property', upsert: [newListing('W-2', { City: 'Changeville' })] },
        { resource: 'Media', upsert: [newMedia('W-2-M1', 'W-2'), newMedia('W-2-M2', 'W-2')] },
        { resource: 'Media', remove: ['W-2-M2', ourMedia[0].MediaKey, 'no-such-media'] },
      ],
    });
    expect(c.status, c.text).toBe(200);
    expect(c.json).toEqual(summary(1, 3, 2, 1));
    expect(w.engine.generation).toBe(1);
    const one = await get(w, `Property('W-2')?$select=City&$expand=Media($select=MediaKey)`);
    expect(one.json).toMatchObject({ City: 'Changeville', Media: [{ MediaKey: 'W-2-M1' }] });
    expect(await count(w, 'Media', `ResourceRecordKey eq '${OURS}'`)).toBe(ourMedia.length - 1);
  });

  it('$changes is atomic: a failing later operation leaves the data as it was', async () => {
    const w = await world();
    const c = await post(w, '$changes', {
      operations: [
        { resource: 'Property', remove: [OURS] },
        { resource: 'Property', upsert: [newListing('W-3')] },
        { resource: 'Property', upsert: [newListing('W-4', { ListPrice: 'cheap' })] },
      ],
    });
    await refused(w, c, 'BadFieldValue');
    expect(c.json.error.message).toContain('ListPrice');
    expect(c.json.error.details[0]).toMatchObject({ code: 'BadFieldValue' });
    expect((await get(w, `Property('${OURS}')`)).status).toBe(200);
    expectErrorShape(await get(w, `Property('W-3')`), 404, 'EntityNotFound');
    expect(await count(w, 'Media', `ResourceRecordKey eq '${OURS}'`)).toBe(ourMedia.length);
    // a later operation outside the sources refuses the whole change too
    const s = await post(
      w,
      '$changes',
      {
        operations: [
          { resource: 'Property', upsert: [newListing('W-3')] },
          { resource: 'Media', upsert: [newMedia('W-M', THEIRS)] },
        ],
      },
      w.crmls,
    );
    await refused(w, s, 'SourceNotAllowed');
    expectErrorShape(await get(w, `Property('W-3')`), 404, 'EntityNotFound');
    // and the next change is generation 1
    expect((await post(w, 'Property', [newListing('W-3')])).json).toEqual(summary(1, 1, 0, 0));
  });

  it('serializes concurrent writes; each is its own generation', async () => {
    const w = await world();
    const [a, b] = await Promise.all([post(w, 'Property', [newListing('W-5')]), post(w, 'Property', [newListing('W-6')])]);
    expect([a.json.generation, b.json.generation].sort()).toEqual([1, 2]);
    expect(await count(w, 'Property', "ListingKey eq 'W-5' or ListingKey eq 'W-6'")).toBe(2);
  });
});

describe("non-admin and unauthenticated requests get exactly today's answers", () => {
  it('a non-admin token: 405 on collections and on records by key, 404 elsewhere, nothing written', async () => {
    const w = await world();
    const body = JSON.stringify([newListing('W-7')]);
    const c = await call(w.handler, `${DATA}/Property`, { method: 'POST', token: w.demo, headers: JSON_HEADERS, body });
    expectErrorShape(c, 405, 'MethodNotAllowed');
    expect(c.headers.get('allow')).toBe('GET, HEAD');
    expect(c.json.error.message).toBe('POST is not allowed on /v1/listings/data/Property; use GET.');
    for (const p of ['Media', 'OpenHouse']) {
      const m = await post(w, p, [], w.demo);
      expectErrorShape(m, 405, 'MethodNotAllowed');
      expect(m.headers.get('allow')).toBe('GET, HEAD');
    }
    const d = await del(w, `Property('${OURS}')`, w.demo);
    expectErrorShape(d, 405, 'MethodNotAllowed');
    expect(d.headers.get('allow')).toBe('GET, HEAD');
    expect(d.json.error.message).toBe(`DELETE is not allowed on /v1/listings/data/Property('${OURS}'); use GET.`);
    // Media('KEY') is readable by every account (fetch by key on every entity set); deleting is not
    const m = await del(w, `Media('${ourMedia[0].MediaKey as string}')`, w.demo);
    expectErrorShape(m, 405, 'MethodNotAllowed');
    expect(m.headers.get('allow')).toBe('GET, HEAD');
    expect((await get(w, `Media('${ourMedia[0].MediaKey as string}')`, w.demo)).status).toBe(200);
    expectErrorShape(await post(w, '$changes', { operations: [] }, w.demo), 404, 'NotFound');
    expectErrorShape(await get(w, '$changes', w.demo), 404, 'NotFound');
    expect(w.engine.generation).toBe(0);
    expectErrorShape(await get(w, "Property('W-7')"), 404, 'EntityNotFound');
  });

  it('no token: 401 before anything else', async () => {
    const w = await world();
    for (const [method, p] of [
      ['POST', 'Property'],
      ['POST', '$changes'],
      ['DELETE', `Property('${OURS}')`],
      ['DELETE', `Media('x')`],
    ]) {
      const c = await call(w.handler, `${DATA}/${p}`, { method, headers: JSON_HEADERS, body: method === 'POST' ? '[]' : undefined });
      expectErrorShape(c, 401, 'MissingToken');
      const bad = await call(w.handler, `${DATA}/${p}`, {
        method,
        headers: { ...JSON_HEADERS, authorization: 'Bearer nope' },
        body: method === 'POST' ? '[]' : undefined,
      });
      expectErrorShape(bad, 401, 'InvalidToken');
    }
    expect(w.engine.generation).toBe(0);
  });
});

describe('admin method and body errors', () => {
  it('405 names what an admin may do on each path', async () => {
    const w = await world();
    const allow = async (method: string, p: string, expected: string): Promise<void> => {
      const c = await call(w.handler, `${DATA}/${p}`, { method, token: w.admin });
      expectErrorShape(c, 405, 'MethodNotAllowed');
      expect(c.headers.get('allow'), `${method} ${p}`).toBe(expected);
    };
    await allow('PUT', 'Property', 'GET, HEAD, POST');
    await allow('DELETE', 'Media', 'GET, HEAD, POST');
    await allow('PATCH', `Property('${OURS}')`, 'GET, HEAD, DELETE');
    await allow('PATCH', `Media('${ourMedia[0].MediaKey as string}')`, 'GET, HEAD, DELETE');
    await allow('GET', '$changes', 'POST');
    await allow('POST', '$metadata', 'GET, HEAD');
    expectErrorShape(await post(w, 'PropertyChange', []), 404, 'NotFound');
    expect((await get(w, `Property('${OURS}')`, w.admin)).status).toBe(200);
  });

  it('refuses bad bodies with stable 400 codes and applies nothing', async () => {
    const w = await world();
    await refused(w, await post(w, 'Property', '[{"ListingKey": ', w.admin), 'InvalidJson');
    await refused(w, await post(w, 'Property', '', w.admin), 'InvalidJson');
    await refused(w, await post(w, 'Property', [newListing('W-8')], w.admin, { 'content-type': 'text/plain' }), 'InvalidContentType');
    await refused(w, await post(w, 'Property', [newListing('W-8')], w.admin, {}), 'InvalidContentType');
    expect((await post(w, 'Property', [], w.admin, { 'content-type': 'application/json; charset=utf-8' })).status).toBe(200);
    for (const body of [{}, { value: 5 }, { values: [] }, { value: [], extra: 1 }, 'null', '"text"', '7']) {
      await refused(w, await post(w, 'Property', body), 'InvalidBody');
    }
    for (const body of [[], { operations: 'x' }, { operations: [], value: [] }]) {
      await refused(w, await post(w, '$changes', body), 'InvalidBody');
    }
    const ops = (...operations: unknown[]) => ({ operations });
    await refused(w, await post(w, '$changes', ops({ resource: 'PropertyChange', upsert: [] })), 'InvalidChange');
    await refused(w, await post(w, '$changes', ops({ resource: 'Nope', upsert: [] })), 'InvalidChange');
    await refused(w, await post(w, '$changes', ops({ upsert: [] })), 'InvalidChange');
    await refused(w, await post(w, '$changes', ops(5)), 'InvalidChange');
    await refused(w, await post(w, '$changes', ops({ resource: 'Property', upsert: [], remove: [] })), 'InvalidChange');
    await refused(w, await post(w, '$changes', ops({ resource: 'Property', remove: [5] })), 'InvalidChange');
    await refused(w, await post(w, '$changes', ops({ resource: 'Property', upsert: {} })), 'InvalidChange');
    // a JSON body cannot carry the engine's JSON Lines bytes: text in their place is refused, never read unchecked
    await refused(w, await post(w, '$changes', ops({ resource: 'Property', upsertLines: JSON.stringify(newListing('W-8')) })), 'InvalidChange');
    // the engine's DataErrors
    await refused(w, await post(w, 'Property', [newListing('W-8'), newListing('W-9', { ListPrice: 'x' })]), 'BadFieldValue');
    await refused(w, await post(w, 'Property', [{ OriginatingSystemName: 'CRMLS', City: 'No key' }]), 'MissingKey');
    await refused(w, await post(w, 'Property', [newListing('W-8'), 5]), 'BadDataLine');
    await refused(w, await post(w, 'Media', [newMedia('W-M9', OURS, { Order: 'first' })]), 'BadFieldValue');
    // a query option on a write
    const opt = await call(w.handler, `${DATA}/Property?$top=1`, { method: 'POST', token: w.admin, headers: JSON_HEADERS, body: '[]' });
    await refused(w, opt, 'QueryOptionNotAllowed');
    expectErrorShape(await del(w, `Property('${OURS}')?$select=City`), 400, 'QueryOptionNotAllowed');
    expect((await get(w, `Property('${OURS}')`)).status).toBe(200);
  });
});

describe('an admin writes only inside its sources', () => {
  it('cannot upsert a listing of another source, or without one', async () => {
    const w = await world();
    const c = await post(w, 'Property', [newListing('W-10'), newListing('W-11', { OriginatingSystemName: 'NWMLS' })], w.crmls);
    await refused(w, c, 'SourceNotAllowed');
    expect(c.json.error.message).toBe('Property record 2 has OriginatingSystemName "NWMLS": this account writes records of its sources only (CRMLS).');
    const { OriginatingSystemName: _, ...noSource } = newListing('W-12');
    await refused(w, await post(w, 'Property', [noSource], w.crmls), 'SourceNotAllowed');
    // nor take over (replace) another source's listing by its key
    const take = await post(w, 'Property', [{ ...theirs, OriginatingSystemName: 'CRMLS' }], w.crmls);
    await refused(w, take, 'SourceNotAllowed');
    expect((await get(w, `Property('${THEIRS}')?$select=OriginatingSystemName`)).json.OriginatingSystemName).toBe('NWMLS');
    // admin (demo's sources, NWMLS among them) may
    expect((await post(w, 'Property', [{ ...theirs, ListPrice: 1 }])).json).toEqual(summary(1, 1, 0, 0));
  });

  it("cannot remove another source's records: 404 / not found, exactly as an unknown key", async () => {
    const w = await world();
    const d = await del(w, `Property('${THEIRS}')`, w.crmls);
    const unknown = await del(w, "Property('NO-SUCH')", w.crmls);
    expectErrorShape(d, 404, 'EntityNotFound');
    expectErrorShape(unknown, 404, 'EntityNotFound');
    expect(d.json.error.message).toBe(`No listing with ListingKey '${THEIRS}' is visible to this account.`);
    expectErrorShape(await del(w, `Media('${theirMedia[0].MediaKey as string}')`, w.crmls), 404, 'EntityNotFound');
    const c = await post(
      w,
      '$changes',
      {
        operations: [
          { resource: 'Property', remove: [THEIRS, 'NO-SUCH', OURS] },
          { resource: 'Media', remove: [theirMedia[0].MediaKey] },
        ],
      },
      w.crmls,
    );
    expect(c.status, c.text).toBe(200);
    expect(c.json).toEqual(summary(1, 0, 1, 3));
    expect((await get(w, `Property('${THEIRS}')`)).status).toBe(200);
    expect(await count(w, 'Media', `ResourceRecordKey eq '${THEIRS}'`)).toBe(theirMedia.length);
    expectErrorShape(await get(w, `Property('${OURS}')`), 404, 'EntityNotFound');
  });

  it("cannot add or move children onto another source's listing", async () => {
    const w = await world();
    const c = await post(w, 'Media', [newMedia('W-M2', THEIRS)], w.crmls);
    await refused(w, c, 'SourceNotAllowed');
    const none = await post(w, 'Media', [newMedia('W-M2', 'NO-SUCH')], w.crmls);
    await refused(w, none, 'SourceNotAllowed');
    // the same answer whether the listing exists elsewhere or not at all
    expect(c.json.error.message.replace(THEIRS, 'K')).toBe(none.json.error.message.replace('NO-SUCH', 'K'));
    await refused(w, await post(w, 'OpenHouse', [{ ...ourOpenHouse, OpenHouseKey: 'W-OH2', ListingKey: THEIRS }], w.crmls), 'SourceNotAllowed');
    await refused(w, await post(w, 'OpenHouse', [{ ...ourOpenHouse, OpenHouseKey: 'W-OH2', OriginatingSystemName: 'NWMLS' }], w.crmls), 'SourceNotAllowed');
    await refused(w, await post(w, 'Media', [newMedia('W-M2', OURS, { ResourceName: 'Member' })], w.crmls), 'SourceNotAllowed');
    // another source's media key cannot be taken over by our listing
    await refused(w, await post(w, 'Media', [newMedia(theirMedia[0].MediaKey as string, OURS)], w.crmls), 'SourceNotAllowed');
    // a listing created earlier in the same change takes children; one removed earlier does not
    const ok = await post(
      w,
      '$changes',
      {
        operations: [
          { resource: 'Property', upsert: [newListing('W-13')] },
          { resource: 'Media', upsert: [newMedia('W-13-M', 'W-13')] },
        ],
      },
      w.crmls,
    );
    expect(ok.json).toEqual(summary(1, 2, 0, 0));
    const gone = await post(
      w,
      '$changes',
      {
        operations: [
          { resource: 'Property', remove: ['W-13'] },
          { resource: 'Media', upsert: [newMedia('W-13-M2', 'W-13')] },
        ],
      },
      w.crmls,
    );
    expectErrorShape(gone, 400, 'SourceNotAllowed');
    expect(w.engine.generation).toBe(1);
    expect(await count(w, 'Media', "ResourceRecordKey eq 'W-13'")).toBe(1);
  });
});

describe('body limits', () => {
  const pad = (bytes: number): string => {
    const body = JSON.stringify([newListing('W-BIG', { PublicRemarks: '' })]);
    return body.replace('"PublicRemarks":""', `"PublicRemarks":"${'x'.repeat(bytes - body.length)}"`);
  };

  it('an admin write takes more than 16,384 bytes up to maxWriteBodyBytes; over it is a 413, declared or streamed', async () => {
    const w = await world({ limits: { maxWriteBodyBytes: 50_000 } });
    const fits = pad(50_000);
    expect(fits.length).toBe(50_000);
    const c = await post(w, 'Property', fits);
    expect(c.status, c.text).toBe(200);
    const over = pad(50_001);
    expectErrorShape(await post(w, 'Property', over), 413, 'PayloadTooLarge');
    const declared = await post(w, 'Property', over, w.admin, { ...JSON_HEADERS, 'content-length': String(over.length) });
    expectErrorShape(declared, 413, 'PayloadTooLarge');
    expect(declared.json.error.message).toBe('The request body is larger than the limit of 50000 bytes.');
    expect(w.engine.generation).toBe(1);
    // the default limit is far above 16,384
    const d = await world();
    expect((await post(d, 'Property', pad(100_000))).status).toBe(200);
  });

  it('everyone else keeps 16,384 bytes', async () => {
    const w = await world();
    const big = pad(20_000);
    const headers = { ...JSON_HEADERS, 'content-length': String(big.length) };
    expectErrorShape(await post(w, 'Property', big, w.demo, headers), 413, 'PayloadTooLarge');
    const anonymous = await call(w.handler, `${DATA}/Property`, { method: 'POST', headers, body: big });
    expectErrorShape(anonymous, 413, 'PayloadTooLarge');
    expect(anonymous.json.error.message).toBe('The request body is larger than the limit of 16384 bytes.');
    // an admin's body that is not a write (the token form) too
    const form = `username=admin&password=admin-password&pad=${'x'.repeat(16_400)}`;
    expectErrorShape(
      await call(w.handler, '/v1/token', {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Bearer ${w.admin}` },
        body: form,
      }),
      413,
      'PayloadTooLarge',
    );
    expect(w.engine.generation).toBe(0);
  });
});

describe('Member and Office over HTTP', () => {
  const members = read('Member.jsonl');
  const offices = read('Office.jsonl');
  const ourMember = members.find((m) => m.OriginatingSystemName === 'CRMLS')!;
  const theirMember = members.find((m) => m.OriginatingSystemName === 'MRED')!;

  it('serve the collections with the query options, each account seeing its sources only', async () => {
    const w = await world();
    const all = await get(w, `Member?${q({ $top: 1000, $count: 'true', $select: 'MemberKey,OriginatingSystemName' })}`);
    expect(all.status, all.text).toBe(200);
    const visible = members.filter((m) => DEMO_SOURCES.includes(m.OriginatingSystemName as string));
    expect(all.json['@odata.count']).toBe(visible.length);
    expect(all.json['@odata.context']).toBe('http://service.test/v1/listings/data/$metadata#Member(MemberKey,OriginatingSystemName)');
    expect(all.json.value.map((m: Rec) => m.MemberKey).sort()).toEqual(visible.map((m) => m.MemberKey).sort());
    const page = await get(w, `Office?${q({ $filter: "OfficeCity eq 'Seattle'", $orderby: 'OfficeName desc' })}`);
    expect(page.status, page.text).toBe(200);
    const seattle = offices.filter((o) => o.OfficeCity === 'Seattle' && DEMO_SOURCES.includes(o.OriginatingSystemName as string));
    expect(page.json.value.map((o: Rec) => o.OfficeKey).sort()).toEqual(
      seattle
        .map((o) => o.OfficeKey)
        .sort()
        .slice(0, 10),
    );
    expectErrorShape(await get(w, `Member?${q({ $top: 50001 })}`), 400, 'TopTooLarge');
    expectErrorShape(await get(w, `Property?${q({ $expand: 'ListAgent($top=1)' })}`), 400, 'QueryOptionNotAllowed');
    const expanded = await get(w, `Property?${q({ $select: 'ListingKey,ListAgentKey', $expand: 'ListAgent($select=MemberFullName)', $top: 3 })}`);
    for (const r of expanded.json.value as Rec[]) {
      expect(r.ListAgent).toEqual({ MemberKey: r.ListAgentKey, MemberFullName: members.find((m) => m.MemberKey === r.ListAgentKey)!.MemberFullName });
    }
  });

  it('admins upsert and remove them within their sources; removing a Member keeps the listings', async () => {
    const w = await world();
    const added = { ...ourMember, MemberKey: 'M-NEW', MemberFullName: 'Nora New' };
    expect((await post(w, 'Member', [added])).json).toEqual(summary(1, 1, 0, 0));
    expect(await count(w, 'Member', "MemberFullName eq 'Nora New'")).toBe(1);
    // another source's Member, a Member without a source, a key another source holds: refused
    await expect(post(w, 'Member', [{ ...theirMember, MemberKey: 'M-X' }], w.crmls)).resolves.toMatchObject({ status: 400 });
    expectErrorShape(await post(w, 'Office', [{ OfficeKey: 'O-X', OfficeName: 'Nowhere' }], w.crmls), 400, 'SourceNotAllowed');
    expectErrorShape(await post(w, 'Member', [{ ...ourMember, MemberKey: theirMember.MemberKey }], w.crmls), 400, 'SourceNotAllowed');
    expect(w.engine.generation).toBe(1);
    // DELETE: another source's Member is not found; our own goes, its listings stay
    expectErrorShape(await del(w, `Member('${theirMember.MemberKey as string}')`, w.crmls), 404, 'EntityNotFound');
    const named = listings.filter((l) => l.ListAgentKey === ourMember.MemberKey).length;
    expect(named).toBeGreaterThan(0);
    const before = await count(w, 'Property', `ListAgentKey eq '${ourMember.MemberKey as string}'`);
    expect((await del(w, `Member('${ourMember.MemberKey as string}')`, w.crmls)).status).toBe(204);
    expect(await count(w, 'Property', `ListAgentKey eq '${ourMember.MemberKey as string}'`)).toBe(before);
    const page = await get(w, `Property?${q({ $filter: `ListAgentKey eq '${ourMember.MemberKey as string}'`, $expand: 'ListAgent', $select: 'ListingKey' })}`);
    for (const r of page.json.value as Rec[]) expect(r.ListAgent).toBeNull();
    const changes = await post(w, '$changes', { operations: [{ resource: 'Office', remove: [offices[0].OfficeKey] }] });
    expect(changes.json).toMatchObject({
      removed: offices[0].OriginatingSystemName === 'CRMLS' || DEMO_SOURCES.includes(offices[0].OriginatingSystemName as string) ? 1 : 0,
    });
  });
});
