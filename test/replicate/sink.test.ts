/**
 * The replicator against the sink interface alone: an in-memory sink (what an engine sink over
 * engine.upsert/remove will be) gets the same records as a data directory, a commit after every
 * page, and the run's removals with their cascade.
 */
import { describe, expect, it } from 'vitest';
import type { JsonRecord } from '../../src/generate/listing.js';
import { replicate } from '../../src/replicate/replicate.js';
import {
  keyOf,
  parentKeyOf,
  REPLICATED_RESOURCES,
  type RemovedCounts,
  type ReplicatedResource,
  type ReplicationSink,
  type ReplicationState,
} from '../../src/replicate/sink.js';
import { clone, dataset, DEMO_SOURCES, dropListings, entries, ORIGIN, TestUpstream, TOKEN, visible } from './helpers.js';

class MemorySink implements ReplicationSink {
  readonly records = Object.fromEntries(REPLICATED_RESOURCES.map((r) => [r, new Map<string, JsonRecord>()])) as Record<
    ReplicatedResource,
    Map<string, JsonRecord>
  >;
  readonly commits: Array<{ state: ReplicationState; final: boolean }> = [];

  readState(): ReplicationState | null {
    return this.commits.at(-1)?.state ?? null;
  }

  has(resource: ReplicatedResource, key: string): boolean {
    return this.records[resource].has(key);
  }

  keys(resource: ReplicatedResource): string[] {
    return [...this.records[resource].keys()];
  }

  upsert(resource: ReplicatedResource, records: readonly JsonRecord[]): void {
    for (const r of records) this.records[resource].set(r[keyOf(resource)] as string, r);
  }

  remove(resource: ReplicatedResource, keys: readonly string[]): RemovedCounts {
    const counts: RemovedCounts = {};
    const gone = new Set(keys.filter((k) => this.records[resource].delete(k)));
    counts[resource] = gone.size;
    if (resource === 'Property') {
      for (const child of ['Media', 'OpenHouse'] as const) {
        for (const [k, r] of this.records[child]) {
          if (gone.has(parentKeyOf(child, r) as string)) {
            this.records[child].delete(k);
            counts[child] = (counts[child] ?? 0) + 1;
          }
        }
      }
    }
    return counts;
  }

  commit(state: ReplicationState, final: boolean): void {
    this.commits.push({ state: structuredClone(state), final });
  }
}

describe("a sink of one's own", () => {
  it('receives the records, a commit per page, and removals with their children', async () => {
    const data = dataset(80, 'replicate-sink');
    const upstream = await TestUpstream.open(data);
    const sink = new MemorySink();
    const first = await replicate({ from: ORIGIN, token: TOKEN, sink, pageSize: 25, fetch: upstream.fetch });
    const expected = visible(data, DEMO_SOURCES);
    for (const r of REPLICATED_RESOURCES) expect(entries(sink.records[r]), r).toEqual(entries(expected[r]));
    const pages = REPLICATED_RESOURCES.reduce((n, r) => n + first.resources[r].pages, 0);
    expect(sink.commits.length).toBeGreaterThanOrEqual(pages);
    expect(sink.commits.at(-1)).toMatchObject({ final: true, state: { status: 'complete' } });
    // cursors only move forward
    const media = sink.commits.map((c) => c.state.resources.Media?.cursor?.timestamp ?? '');
    expect(media).toEqual([...media].sort());

    const later = clone(data);
    const gone = later.Property.filter((p) => DEMO_SOURCES.includes(p.OriginatingSystemName as string))
      .slice(0, 3)
      .map((p) => p.ListingKey as string);
    dropListings(later, gone);
    await upstream.setData(later);
    const second = await replicate({ from: ORIGIN, token: TOKEN, sink, pageSize: 25, fetch: upstream.fetch });
    const after = visible(later, DEMO_SOURCES);
    for (const r of REPLICATED_RESOURCES) expect(entries(sink.records[r]), r).toEqual(entries(after[r]));
    expect(second.resources.Property.removed).toBe(3);
    expect(second.resources.Media.removed).toBe(expected.Media.size - after.Media.size);
  });
});

describe('an upstream without Member and Office', () => {
  it('replicates the rest: not in $metadata, or a 404 for the collection', async () => {
    const data = dataset(60, 'replicate-no-roster');
    const expected = visible(data, DEMO_SOURCES);
    for (const how of ['metadata', '404'] as const) {
      const upstream = await TestUpstream.open(data);
      upstream.intercept = async (url) => {
        if (how === '404' && /\/(Member|Office)\?/.test(url)) {
          return new Response(JSON.stringify({ error: { code: 'NotFound', message: 'Nothing here.' } }), { status: 404 });
        }
        if (how === 'metadata' && url.endsWith('$metadata')) {
          const xml = await fetchMetadata(upstream, url);
          return new Response(
            xml.replace(/<EntityType Name="(Member|Office)">[\s\S]*?<\/EntityType>/g, '').replace(/<EntitySet Name="(Member|Office)"[^>]*\/>/g, ''),
            { status: 200 },
          );
        }
        return undefined;
      };
      const sink = new MemorySink();
      const progress: string[] = [];
      const result = await replicate({ from: ORIGIN, token: TOKEN, sink, pageSize: 25, fetch: upstream.fetch, onProgress: (p) => progress.push(p.message) });
      for (const r of ['Property', 'Media', 'OpenHouse'] as const) expect(entries(sink.records[r]), `${how} ${r}`).toEqual(entries(expected[r]));
      expect(sink.records.Member.size).toBe(0);
      expect(result.resources.Member.upserted).toBe(0);
      expect(progress.some((m) => m.startsWith('Member: skipped, the upstream does not offer it'))).toBe(true);
      expect(sink.commits.at(-1)?.state.resources.Member).toBeUndefined();
      expect(expected.Member.size).toBeGreaterThan(0);
    }
  });
});

/** The upstream's own $metadata for `url` (answered by its handler, with the real token). */
async function fetchMetadata(upstream: TestUpstream, url: string): Promise<string> {
  const saved = upstream.intercept;
  upstream.intercept = null;
  try {
    const res = await upstream.fetch(url, { headers: { Authorization: `Bearer ${TOKEN}` } });
    return await res.text();
  } finally {
    upstream.intercept = saved;
  }
}
