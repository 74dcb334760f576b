import { beforeAll, describe, expect, it } from 'vitest';
import { Engine } from '../../src/engine.js';
import { createHandler, type Handler } from '../../src/service/handler.js';
import { BASE, call, DEMO_SOURCES, login, NOW, quickAccounts } from './helpers.js';

const DAY = 86_400_000;
let ms = NOW;
let engine: Engine;
let handler: Handler;
let token: string;

beforeAll(async () => {
  engine = await Engine.open({ now: () => new Date(ms) });
  handler = createHandler({ engine, accounts: quickAccounts(), clock: () => NOW, onError: () => undefined });
  token = await login(handler);
});

const PAGES: Array<Record<string, string>> = [
  { $filter: "StandardStatus eq 'Active'", $orderby: 'ListPrice desc', $top: '25' },
  { $orderby: 'ListingKey', $top: '20', $count: 'true' },
  { $select: 'ListingKey,ListPrice,DaysOnMarket', $top: '30' },
  { $select: 'DaysOnMarket', $top: '5' },
  { $select: 'ListingKey,City', $ignorenulls: 'true', $top: '10' },
  { $expand: 'Media($top=2)', $top: '3' },
  { $select: 'ListingKey,Media', $top: '3' },
  { $orderby: 'ListingKey', $top: '600' }, // streamed
];

/** The page as the engine's own records stringify: what the service wrote before record texts were cached. */
function expected(query: Record<string, string>): string {
  const text = new URLSearchParams(query).toString();
  return JSON.stringify(engine.query('Property', decodeURIComponent(text.replace(/\+/g, ' ')), { sources: DEMO_SOURCES, base: `${BASE}/v1/listings/data/` }));
}

async function body(query: Record<string, string>): Promise<string> {
  const res = await call(handler, `/v1/listings/data/Property?${new URLSearchParams(query).toString()}`, { token });
  expect(res.status).toBe(200);
  return res.text;
}

describe('pages written from cached record texts', () => {
  it('are byte for byte the stringified records, warm or cold, as the clock moves and after a change', async () => {
    const seen: string[][] = [];
    for (let round = 0; round < 3; round++) {
      const bodies: string[] = [];
      for (const page of PAGES) {
        const got = await body(page);
        expect(got).toBe(expected(page));
        bodies.push(got);
      }
      seen.push(bodies);
      ms += 2 * DAY; // DaysOnMarket moves on
    }
    // the whole-record page changed with the clock (DaysOnMarket), the texts did not stay behind
    expect(seen[1][0]).not.toBe(seen[0][0]);
    const first = JSON.parse(seen[2][1]) as { value: Array<Record<string, unknown>> };
    const { ListingKey, OriginatingSystemName, ModificationTimestamp } = first.value[0];
    await engine.upsert('Property', [
      {
        ...first.value[0],
        ListPrice: 777_777,
        DaysOnMarket: undefined,
        service_OriginalEntryTimestamp: undefined,
        service_DaysOnMarketReferenceTimestamp: undefined,
      },
    ]);
    const after = await body(PAGES[1]);
    expect(after).toBe(expected(PAGES[1]));
    const changed = (JSON.parse(after) as typeof first).value[0];
    expect([changed.ListingKey, changed.OriginatingSystemName, changed.ModificationTimestamp, changed.ListPrice]).toEqual([
      ListingKey,
      OriginatingSystemName,
      ModificationTimestamp,
      777_777,
    ]);
  });

  it('write navigation pages (rows handed over, records not built) as the engine builds them, small and streamed', async () => {
    const key = engine.query('Property', '$select=ListingKey&$orderby=ListingKey&$top=1', { sources: DEMO_SOURCES }).value[0].ListingKey as string;
    for (const query of [{ $top: '5' }, { $select: 'MediaKey,MediaURL', $orderby: 'MediaKey desc' }] as Array<Record<string, string>>) {
      const text = new URLSearchParams(query).toString();
      const want = JSON.stringify(
        engine.navigate('Property', key, 'Media', decodeURIComponent(text.replace(/\+/g, ' ')), { sources: DEMO_SOURCES, base: `${BASE}/v1/listings/data/` }),
      );
      for (let round = 0; round < 3; round++) {
        const res = await call(handler, `/v1/listings/data/Property('${key}')/Media?${text}`, { token });
        expect(res.status).toBe(200);
        expect(res.text).toBe(want);
      }
    }
    // a streamed Media page of rows (more than 512 records), cold then warm
    for (let round = 0; round < 2; round++) {
      const res = await call(handler, '/v1/listings/data/Media?$orderby=MediaKey&$top=700&$select=MediaKey,Order', { token });
      expect(res.status).toBe(200);
      expect(res.text).toBe(
        JSON.stringify(
          engine.query('Media', '$orderby=MediaKey&$top=700&$select=MediaKey,Order', { sources: DEMO_SOURCES, base: `${BASE}/v1/listings/data/` }),
        ),
      );
    }
  });
});
