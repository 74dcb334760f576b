/**
 * MiniSearch (minisearch 7.x) as a user configures it for listing search: one index over the three
 * search texts (fields keyword, address, agent; idField ListingKey), storing only what the Q6 filter
 * reads (the point and ListPrice). MiniSearch is a full-text library: it has no field filters,
 * sorting, paging, counting or grouping outside a text query, so Q1, Q4, Q5, Q8, Q9 and Q10 are n/a.
 *
 * Its defaults: the tokenizer splits on white space and Unicode punctuation (so `walk-in` is two
 * words, as in reso-engine; no diacritics folding), terms are lower-cased, scoring is BM25+
 * (k 1.2, b 0.7, d 0.5) per field. Q2, Q6 and Q7 search one field with every term required
 * (`combineWith: 'AND'`), whole words only (`prefix: false, fuzzy: false`); Q6 adds the distance and
 * price predicates as MiniSearch's `filter` callback over the stored fields. Q3 cannot say "40% of
 * the terms": it is `combineWith: 'OR'` (any term) with the prefix match on the last term (the
 * convention of MiniSearch's own autoSuggest) and `fuzzy: 0.2` (one edit for 3–7 letters, two for
 * 8–12); MiniSearch weighs prefix and fuzzy matches below exact ones by itself.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import MiniSearch, { type SearchOptions } from 'minisearch';
import {
  distanceMeters,
  forEachListing,
  instantOf,
  locationOf,
  searchText,
  type Answer,
  type Families,
  type FamilyId,
  type FamilyParams,
  type Rec,
} from '../families.js';
import type { Peer } from '../peer.js';

interface Doc {
  ListingKey: string;
  ListingId?: string;
  StandardStatus?: string;
  PropertyType?: string;
  City?: string;
  ListPrice?: number;
  BedroomsTotal?: number;
  ModificationTimestamp?: number;
  lat?: number;
  lon?: number;
  keyword: string;
  address: string;
  agent: string;
}

const BATCH = 10_000;

function version(): string {
  // minisearch's exports map does not expose package.json: read it next to the resolved entry.
  const require = createRequire(import.meta.url);
  let dir = path.dirname(require.resolve('minisearch'));
  for (;;) {
    try {
      const pkg = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { name?: string; version: string };
      if (pkg.name === 'minisearch') return pkg.version;
    } catch {
      // not here; go up
    }
    const up = path.dirname(dir);
    if (up === dir) return '?';
    dir = up;
  }
}

function documentOf(r: Rec): Doc {
  const point = locationOf(r);
  return {
    ListingKey: r.ListingKey as string,
    ListingId: r.ListingId as string | undefined,
    StandardStatus: r.StandardStatus as string | undefined,
    PropertyType: r.PropertyType as string | undefined,
    City: r.City as string | undefined,
    ListPrice: typeof r.ListPrice === 'number' ? r.ListPrice : undefined,
    BedroomsTotal: typeof r.BedroomsTotal === 'number' ? r.BedroomsTotal : undefined,
    ModificationTimestamp: instantOf(r, 'ModificationTimestamp') ?? undefined,
    lat: point?.lat,
    lon: point?.lon,
    keyword: searchText(r, 'KeywordSearchText'),
    address: searchText(r, 'RawAddressSearchText'),
    agent: searchText(r, 'ListAgentSearchText'),
  };
}

const NOT_TEXT = 'MiniSearch is a full-text index: it cannot filter, sort, page, count or group without a text query';

class MiniSearchPeer implements Peer {
  readonly name = `MiniSearch ${version()}`;
  readonly loads = 'Property only';
  private index!: MiniSearch<Doc>;
  private readonly plans = new Map<FamilyId, string>();

  async load(dir: string, log: (line: string) => void): Promise<void> {
    const index = new MiniSearch<Doc>({
      idField: 'ListingKey',
      fields: ['keyword', 'address', 'agent'],
      storeFields: ['lat', 'lon', 'ListPrice'],
    });
    let batch: Doc[] = [];
    await forEachListing(dir, (r, i) => {
      batch.push(documentOf(r));
      if (batch.length === BATCH) {
        index.addAll(batch);
        batch = [];
      }
      if ((i + 1) % 50_000 === 0) log(`minisearch: ${i + 1} listings`);
    });
    index.addAll(batch);
    this.index = index;
    log(`minisearch: ${index.documentCount} documents, ${index.termCount} terms`);
  }

  prepare<F extends FamilyId>(family: F, params: FamilyParams[F], _families: Families): (() => Answer) | string {
    const index = this.index;
    const exactAll = (field: string): SearchOptions => ({ fields: [field], combineWith: 'AND', prefix: false, fuzzy: false });
    const keys = (terms: string, options: SearchOptions, top?: number) => (): Answer => {
      const hits = index.search(terms, options);
      return { kind: 'keys', keys: (top === undefined ? hits : hits.slice(0, top)).map((h) => h.id as string) };
    };
    let terms: string;
    let options: SearchOptions;
    let top: number | undefined;
    switch (family) {
      case 'Q2': {
        const q = params as FamilyParams['Q2'];
        ({ terms, top } = q);
        options = exactAll('keyword');
        break;
      }
      case 'Q3': {
        const q = params as FamilyParams['Q3'];
        ({ terms, top } = q);
        options = { fields: ['address'], combineWith: 'OR', prefix: (_t, i, all) => i === all.length - 1, fuzzy: 0.2 };
        break;
      }
      case 'Q6': {
        const q = params as FamilyParams['Q6'];
        ({ terms, top } = q);
        const center = { lat: q.lat, lon: q.lon };
        options = {
          ...exactAll('keyword'),
          filter: (r) => {
            const price = r.ListPrice as number | undefined;
            const lat = r.lat as number | undefined;
            const lon = r.lon as number | undefined;
            return (
              price !== undefined &&
              price >= q.priceMin &&
              price <= q.priceMax &&
              lat !== undefined &&
              lon !== undefined &&
              distanceMeters({ lat, lon }, center) <= q.radiusM
            );
          },
        };
        break;
      }
      case 'Q7': {
        terms = (params as FamilyParams['Q7']).terms;
        options = exactAll('agent');
        break;
      }
      default:
        return NOT_TEXT;
    }
    this.plans.set(
      family,
      `search(${JSON.stringify(terms)}, ${JSON.stringify(options, (k, v: unknown) => (typeof v === 'function' ? `<${k} function>` : v))})${top === undefined ? '' : `.slice(0, ${top})`}`,
    );
    return keys(terms, options, top);
  }

  explain(_families: Families, family: FamilyId): string {
    return this.plans.get(family) ?? '';
  }
}

export default (): Peer => new MiniSearchPeer();
