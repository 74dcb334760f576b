import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../src/index.js';

let server: TestServer;
let token: string;

beforeAll(async () => {
  // tokens live 30 days here, so that moving the clock by days keeps this one
  server = await startTestServer({ now: '2025-06-01T00:00:00Z', service: { tokenLifetimeSeconds: 30 * 86_400 } });
  token = await server.token('demo');
});
afterAll(() => server.close());
beforeEach(async () => {
  await server.reset(); // the data as loaded: nothing a test changed leaks into the next
  server.faults.clear();
  server.requests.clear();
});

const listings = (query: string): Promise<Response> =>
  fetch(`${server.url}/v1/listings/data/Property?${query}`, { headers: { Authorization: `Bearer ${token}` } });

it('retries after a 429', async () => {
  server.faults.set([{ path: '/v1/listings/data/Property', nth: 1, fault: { kind: 'status', status: 429, retryAfter: 0 } }]);
  let response = await listings('$top=5');
  for (let attempt = 1; response.status === 429 && attempt < 5; attempt++) {
    await new Promise((resolve) => setTimeout(resolve, Number(response.headers.get('Retry-After')) * 1000));
    response = await listings('$top=5');
  }
  expect(response.status).toBe(200);
  expect(server.requests.list().map((r) => [r.status, r.fault])).toEqual([
    [429, 'rule 0'],
    [200, null],
  ]);
});

it('counts DaysOnMarket from the clock', async () => {
  const daysOnMarket = async (): Promise<number> => {
    const page = (await (await listings('$top=1&$select=DaysOnMarket')).json()) as { value: Array<{ DaysOnMarket: number }> };
    return page.value[0].DaysOnMarket;
  };
  const before = await daysOnMarket();
  server.clock.advance('P3D');
  expect(await daysOnMarket()).toBe(before + 3);
});

it('starts each test from the data as loaded', async () => {
  const count = async (): Promise<number> => ((await (await listings('$count=true&$top=0')).json()) as { '@odata.count': number })['@odata.count'];
  const [first] = server.engine.keys('Property');
  await server.engine.remove('Property', [first]);
  expect(server.engine.has('Property', first)).toBe(false);
  await server.reset();
  expect(server.engine.has('Property', first)).toBe(true);
  expect(await count()).toBeGreaterThan(0);
});
