/**
 * The Lookup resource over HTTP: the collection (the engine's rows, the same bytes for every
 * account, paged, with query options), its $metadata declaration and service document entry, a
 * value an admin write brings listed in the next request, and no writes to Lookup itself.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_DATA_DIR, Engine } from '../../src/engine.js';
import { hashPassword } from '../../src/generate/dataset.js';
import { createHandler } from '../../src/service/handler.js';
import { BASE, call, DEMO_SOURCES, expectErrorShape, login, NOW, q, quickAccounts, TestClock } from './helpers.js';

const DATA = '/v1/listings/data';
const listing = JSON.parse(readFileSync(path.join(DEFAULT_DATA_DIR, 'Property.jsonl'), 'utf8').split('\n')[0]) as Record<string, unknown>;
const salt = (s: string): Buffer => Buffer.from(s.padEnd(16, '.'));

async function world() {
  const engine = await Engine.open({ now: () => new Date(NOW) });
  const accounts = {
    accounts: [
      ...quickAccounts().accounts,
      { username: 'admin', password_hash: hashPassword('admin-password', salt('admin'), 1024, 8, 1), sources: [...DEMO_SOURCES], admin: true },
    ],
  };
  const handler = createHandler({ engine, accounts, clock: new TestClock().now, onError: () => undefined });
  return { engine, handler, demo: await login(handler, 'demo'), partner: await login(handler, 'partner'), admin: await login(handler, 'admin') };
}

describe('GET /v1/listings/data/Lookup', () => {
  it('answers the engine rows with every query option, the same bytes for accounts of different sources', async () => {
    const w = await world();
    for (const query of [
      q({ $top: 1000, $count: 'true' }),
      q({ $filter: "LookupName eq 'StandardStatus' and StandardLookupValue ne null", $orderby: 'LookupValue desc', $select: 'LookupValue,LegacyODataValue' }),
      q({ $filter: 'StandardLookupValue eq null', $orderby: 'ModificationTimestamp,LookupKey', $skip: 3, $top: 4, $count: 'true' }),
      q({ $apply: 'groupby((LookupName),aggregate($count as n))', $orderby: 'n desc,LookupName', $top: 5 }),
      '',
    ]) {
      const demo = await call(w.handler, `${DATA}/Lookup?${query}`, { token: w.demo });
      const partner = await call(w.handler, `${DATA}/Lookup?${query}`, { token: w.partner });
      expect(demo.status, `${query}: ${demo.text}`).toBe(200);
      expect(partner.text).toBe(demo.text);
      const params = new URLSearchParams(query);
      const expected = w.engine.query('Lookup', Object.fromEntries(params), { base: `${BASE}${DATA}/` });
      expect(demo.json.value).toEqual(expected.value);
      expect(demo.json['@odata.context']).toMatch(/\$metadata#Lookup/);
    }
    // pages: the default page of 10 with a nextLink that reads the rest
    const first = await call(w.handler, `${DATA}/Lookup?$select=LookupKey`, { token: w.demo });
    expect(first.json.value).toHaveLength(10);
    const second = await call(w.handler, first.json['@odata.nextLink'] as string, { token: w.partner });
    expect(second.status).toBe(200);
    expect(second.json.value).toEqual(w.engine.query('Lookup', '$select=LookupKey&$skip=10&$top=10').value);
    // a bad option is the binder's coded 400
    expectErrorShape(await call(w.handler, `${DATA}/Lookup?${q({ $filter: 'ListPrice gt 1' })}`, { token: w.demo }), 400, 'UnknownField');
  });

  it('lists a value an admin write brings in the next request; Lookup itself is read-only', async () => {
    const w = await world();
    const filter = q({ $filter: "LookupName eq 'Appliances' and LookupValue eq 'Quantum Toaster'", $count: 'true' });
    expect((await call(w.handler, `${DATA}/Lookup?${filter}`, { token: w.partner })).json['@odata.count']).toBe(0);
    const body = JSON.stringify([{ ...listing, ListingKey: 'LK-HTTP', ListingId: 'LK-HTTP', OriginatingSystemName: 'CRMLS', Appliances: ['Quantum Toaster'] }]);
    const posted = await call(w.handler, `${DATA}/Property`, { method: 'POST', token: w.admin, headers: { 'content-type': 'application/json' }, body });
    expect(posted.status, posted.text).toBe(200);
    // partner does not see the CRMLS listing, but sees the value
    const after = await call(w.handler, `${DATA}/Lookup?${filter}`, { token: w.partner });
    expect(after.json['@odata.count']).toBe(1);
    expect(after.json.value[0]).toMatchObject({ LookupValue: 'Quantum Toaster', StandardLookupValue: null, LegacyODataValue: null });

    const refused = await call(w.handler, `${DATA}/Lookup`, { method: 'POST', token: w.admin, headers: { 'content-type': 'application/json' }, body: '[]' });
    expectErrorShape(refused, 405, 'MethodNotAllowed');
    expect(refused.headers.get('allow')).toBe('GET, HEAD');
    const changes = await call(w.handler, `${DATA}/$changes`, {
      method: 'POST',
      token: w.admin,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ operations: [{ resource: 'Lookup', remove: ['x'] }] }),
    });
    expectErrorShape(changes, 400, 'InvalidChange');
  });

  it('is declared in $metadata (DD 2.0 names and types, key LookupKey) and in the service document', async () => {
    const w = await world();
    const xml = (await call(w.handler, `${DATA}/$metadata`, { token: w.demo })).text;
    const start = xml.indexOf('<EntityType Name="Lookup">');
    expect(start).toBeGreaterThan(0);
    const type = xml.slice(start, xml.indexOf('</EntityType>', start));
    expect([...type.matchAll(/<Property Name="(\w+)" Type="([\w.]+)"/g)].map((m) => `${m[1]} ${m[2]}`)).toEqual([
      'LookupKey Edm.String',
      'LegacyODataValue Edm.String',
      'LookupName Edm.String',
      'LookupValue Edm.String',
      'ModificationTimestamp Edm.DateTimeOffset',
      'StandardLookupValue Edm.String',
    ]);
    expect(type).toContain('<Key><PropertyRef Name="LookupKey"/></Key>');
    expect(xml).toContain('<EntitySet Name="Lookup" EntityType="org.reso.metadata.Lookup"/>');
    // every LookupName an annotation names has rows
    const names = new Set([...xml.matchAll(/Term="RESO\.OData\.Metadata\.LookupName" String="(\w+)"/g)].map((m) => m[1]));
    for (const name of names) expect(w.engine.query('Lookup', `$filter=LookupName eq '${name}'&$count=true&$top=0`)['@odata.count'], name).toBeGreaterThan(0);
    const doc = await call(w.handler, `${DATA}/`, { token: w.demo });
    expect(doc.json.value).toContainEqual({ name: 'Lookup', kind: 'EntitySet', url: 'Lookup' });
  });
});

describe('Lookup by key and its count', () => {
  it('Lookup(KEY) in both key forms answers the row for every account; /Lookup/$count the number of rows; admins cannot delete one', async () => {
    const w = await world();
    const rows = w.engine.query('Lookup', { $filter: "LookupName eq 'StandardStatus'", $top: 3, $orderby: 'LookupKey' }).value;
    expect(rows).toHaveLength(3);
    for (const row of rows) {
      const key = row.LookupKey as string;
      for (const form of [`Lookup('${key}')`, `Lookup(LookupKey='${key}')`]) {
        for (const token of [w.demo, w.partner]) {
          const c = await call(w.handler, `${DATA}/${form}`, { token });
          expect(c.status, c.text).toBe(200);
          expect(c.json).toEqual({ '@odata.context': `${BASE}${DATA}/$metadata#Lookup/$entity`, ...row });
        }
      }
    }
    expectErrorShape(await call(w.handler, `${DATA}/Lookup('no-such-key')`, { token: w.demo }), 404, 'EntityNotFound');
    const total = w.engine.query('Lookup', { $top: 0, $count: 'true' })['@odata.count'];
    const counted = await call(w.handler, `${DATA}/Lookup/$count`, { token: w.partner });
    expect(counted.status).toBe(200);
    expect(counted.text).toBe(String(total));
    const statuses = await call(w.handler, `${DATA}/Lookup/$count?${q({ $filter: "LookupName eq 'StandardStatus'" })}`, { token: w.demo });
    expect(Number(statuses.text)).toBe(w.engine.count('Lookup', "$filter=LookupName eq 'StandardStatus'"));
    const del = await call(w.handler, `${DATA}/Lookup('${rows[0].LookupKey as string}')`, { token: w.admin, method: 'DELETE' });
    expectErrorShape(del, 405, 'MethodNotAllowed');
  });
});
