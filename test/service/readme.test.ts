/**
 * The README's curl walk-through, run as written (only the base URL changed) against a real
 * server with the default data set and its real accounts. Skipped, saying why, without curl.
 */
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serve, type Server } from '../../src/adapters/http.js';
import { createHandler } from '../../src/service/handler.js';
import { defaultEngine } from './helpers.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const readme = readFileSync(path.join(repo, 'README.md'), 'utf8');
const block = /<!-- walkthrough:start -->\n```sh\n([\s\S]*?)```\n<!-- walkthrough:end -->/.exec(readme)?.[1];
const missing = ['curl', 'bash', 'sed'].filter((tool) => spawnSync(tool, ['--version'], { stdio: 'ignore' }).error !== undefined);
const skipReason = missing.length > 0 ? `${missing.join(', ')} not installed` : null;
if (skipReason) console.warn(`README walk-through skipped: ${skipReason}`);

describe.skipIf(skipReason !== null)(`the README curl walk-through${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  let server: Server;

  beforeAll(async () => {
    server = await serve(createHandler({ engine: await defaultEngine() }), { port: 0 });
  });

  afterAll(async () => {
    await server?.close();
  });

  it('works as written', async () => {
    expect(block, 'README.md has a walkthrough block').toBeDefined();
    expect(block).toContain('BASE=http://127.0.0.1:8080\n');
    const script = block!.replace('BASE=http://127.0.0.1:8080\n', `BASE=${server.url}\n`);
    // one response per line: each curl's body, then a newline
    const { code, out, err } = await new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
      const child = spawn('bash', ['-c', `set -euo pipefail\ncurl() { command curl --max-time 30 "$@"; echo; }\n${script}`], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let o = '';
      let e = '';
      child.stdout.on('data', (b: Buffer) => (o += b.toString()));
      child.stderr.on('data', (b: Buffer) => (e += b.toString()));
      child.on('exit', (c) => resolve({ code: c, out: o, err: e }));
    });
    expect(err).toBe('');
    expect(code).toBe(0);
    const bodies = out
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(bodies).toHaveLength(14);
    for (const b of bodies) expect(b.error).toBeUndefined();
    const [resources, profiles, search, geo, expanded, grouped, one, paged, navigated, agents, counted, photo, lookups, events] = bodies;
    expect(resources.resources.listings.map((l: { originating_system_name: string }) => l.originating_system_name)).toEqual(['CRMLS', 'NWMLS', 'ARMLS', 'HAR']);
    expect(Object.keys(profiles.profiles)).toEqual(['CRMLS', 'NWMLS', 'ARMLS', 'HAR']);
    expect(search['@odata.count']).toBeGreaterThan(5);
    expect(search.value).toHaveLength(5);
    for (const r of search.value) expect(r.ListPrice).toBeLessThanOrEqual(900_000);
    expect(search.value.map((r: { ListPrice: number }) => r.ListPrice)).toEqual(
      [...search.value.map((r: { ListPrice: number }) => r.ListPrice)].sort((a, b) => a - b),
    );
    expect(geo.value).toHaveLength(3);
    for (const r of geo.value) expect(r.Location.type).toBe('Point');
    expect(expanded.value).toHaveLength(2);
    for (const r of expanded.value) {
      expect(r.Media.length).toBeLessThanOrEqual(2);
      expect(Array.isArray(r.OpenHouse)).toBe(true);
      expect(Object.keys(r.ListAgent)).toEqual(['MemberKey', 'MemberEmail', 'MemberFullName']);
    }
    expect(grouped.value.length).toBeGreaterThan(3);
    for (const g of grouped.value) expect(Object.keys(g)).toEqual(['City', 'Listings', 'MedianListPrice']);
    expect(one).toMatchObject({
      '@odata.context': `${server.url}/v1/listings/data/$metadata#Property(City,ListPrice,StandardStatus)/$entity`,
      ListingKey: 'P000000005',
      City: 'Seattle',
    });
    expect(paged.value).toHaveLength(4);
    expect(paged['@odata.nextLink'].startsWith(`${server.url}/v1/listings/data/Property?`)).toBe(true);
    expect(navigated['@odata.context']).toBe(`${server.url}/v1/listings/data/$metadata#Media(MediaKey,Order)`);
    expect(navigated.value).toHaveLength(3);
    expect(navigated['@odata.count']).toBeGreaterThan(3);
    for (const m of navigated.value) expect(Object.keys(m)).toEqual(['MediaKey', 'Order']);
    expect(agents['@odata.count']).toBeGreaterThan(3);
    expect(agents.value).toHaveLength(3);
    for (const m of agents.value) expect(Object.keys(m)).toEqual(['MemberKey', 'MemberFullName', 'MemberMlsId', 'OfficeName']);
    const names = agents.value.map((m: { MemberFullName: string }) => m.MemberFullName.split(' ').reverse().join(' '));
    expect(names).toEqual([...names].sort());
    const engine = await defaultEngine();
    expect(counted).toBe(engine.count('Property', "$filter=City eq 'Seattle' and Location ne null", { sources: ['CRMLS', 'NWMLS', 'ARMLS', 'HAR'] }));
    expect(counted).toBeGreaterThan(10);
    expect(photo).toEqual({
      '@odata.context': `${server.url}/v1/listings/data/$metadata#Media(MediaURL)/$entity`,
      MediaKey: 'P000000005-M01',
      MediaURL: expect.stringMatching(/^https:/),
    });
    expect(lookups['@odata.context']).toMatch(/\/v1\/listings\/data\/\$metadata#Lookup/);
    expect(lookups.value).toEqual([
      { LookupKey: expect.any(String), LegacyODataValue: 'Active', LookupValue: 'Active', StandardLookupValue: 'Active' },
      {
        LookupKey: expect.any(String),
        LegacyODataValue: 'ActiveUnderContract',
        LookupValue: 'Active Under Contract',
        StandardLookupValue: 'Active Under Contract',
      },
      { LookupKey: expect.any(String), LegacyODataValue: 'Canceled', LookupValue: 'Canceled', StandardLookupValue: 'Canceled' },
    ]);
    expect(events['@odata.context']).toBe(`${server.url}/v1/listings/data/$metadata#EntityEvent`);
    expect(events.value).toHaveLength(3);
    const sequences = events.value.map((e: { EntityEventSequence: number }) => e.EntityEventSequence);
    expect(sequences[0]).toBeGreaterThan(2000);
    expect(sequences).toEqual([...sequences].sort((a, b) => a - b));
    for (const e of events.value) {
      expect(Object.keys(e)).toEqual(['EntityEventSequence', 'OriginatingSystemName', 'ResourceName', 'ResourceRecordKey', 'ResourceRecordUrl']);
      expect(['CRMLS', 'NWMLS', 'ARMLS', 'HAR']).toContain(e.OriginatingSystemName);
    }
  });
});
