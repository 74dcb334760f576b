/**
 * Orama (@orama/orama 3.x) as a user configures it for listings: one database whose schema holds
 * the three search texts as `string` (Orama's radix index, BM25), the exact-match fields as `enum`,
 * the numbers as `number` (AVL trees) and Location as `geopoint` (BKD tree). Every family
 * is one `search` call; what Orama cannot express is n/a. Notes on Orama's semantics (v3.1):
 *
 * - Text: Orama's tokenizer lower-cases and splits on anything but [A-Za-z0-9_'-] and accented
 *   vowels (so `walk-in` stays one word), keeps each word once per field, so its BM25 variant
 *   (k 1.2, b 0.75, d 0.5) sees tf = 1 / distinct words, and matches query words as prefixes unless
 *   `exact: true`. Collecting a word's postings deduplicates with `Array.includes` per document
 *   (radix findAllWords), quadratic in the word's document count: a word in 60–90% of 100k
 *   listings ('pool', 'granite') takes seconds. `threshold: 0` returns only
 *   documents holding every query word in one property; `threshold: 1` (the default) any word.
 *   `exact: true` also re-checks hits with a case-sensitive `\bterm\b` regex on the stored text, so
 *   the texts are stored and queried lower-cased (Orama's own index is case-insensitive anyway).
 * - All-terms families (Q2, Q6, Q7): `exact: true, threshold: 0`. Q3 has no min-match count in
 *   Orama: `threshold: 1` (any word), Orama's default prefix matching and `tolerance: 1`.
 * - Sorted families use a custom `sortBy` function (field desc, then ListingKey), the one way Orama
 *   orders ties by key: its property sort (`sortBy: { property, order: 'DESC' }`, a presorted index)
 *   puts ties in reverse insertion order under DESC (at 100k it is ~4x faster on Q8, but Q1's
 *   ListPrice ties come out in the wrong order). The custom function does not use that index, so
 *   sort indexes are disabled.
 * - Q5: `groupBy` rejects `enum` properties, so City is also indexed as a `string` (CityGroup) to
 *   group on; groups read the stored value, so they are exact. Orama cannot store null (schema
 *   validation rejects it), so absent fields are left out, and listings without a City fall in no
 *   group (reso-engine reports a null group; the Active listings of the bench data all have one).
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { count, create, insertMultiple, search, type Orama, type Results, type SearchParams } from '@orama/orama';
import {
  forEachListing,
  instantOf,
  locationOf,
  nearestRank,
  searchText,
  sortGroups,
  type Answer,
  type Families,
  type FamilyId,
  type FamilyParams,
  type Group,
  type Rec,
} from '../families.js';
import type { Peer } from '../peer.js';

const SCHEMA = {
  ListingId: 'enum',
  StandardStatus: 'enum',
  PropertyType: 'enum',
  City: 'enum',
  /** City again, as a `string`: Orama's groupBy accepts only string, number and boolean properties. */
  CityGroup: 'string',
  ListPrice: 'number',
  BedroomsTotal: 'number',
  ModificationTimestamp: 'number',
  location: 'geopoint',
  keyword: 'string',
  address: 'string',
  agent: 'string',
} as const;

type Db = Orama<typeof SCHEMA>;

interface Doc {
  /** Orama's document id: the ListingKey. */
  id: string;
  ListingId?: string;
  StandardStatus?: string;
  PropertyType?: string;
  City?: string;
  CityGroup?: string;
  ListPrice?: number;
  BedroomsTotal?: number;
  ModificationTimestamp?: number;
  location?: { lat: number; lon: number };
  keyword: string;
  address: string;
  agent: string;
}

type Params = SearchParams<Db, Doc>;

const BATCH = 10_000;

function version(): string {
  const require = createRequire(import.meta.url);
  const pkg = JSON.parse(readFileSync(require.resolve('@orama/orama/package.json'), 'utf8')) as { version: string };
  return pkg.version;
}

/** A record as an Orama document; absent values are left out (Orama rejects null). */
function documentOf(r: Rec): Doc {
  const doc: Doc = {
    id: r.ListingKey as string,
    keyword: searchText(r, 'KeywordSearchText').toLowerCase(),
    address: searchText(r, 'RawAddressSearchText').toLowerCase(),
    agent: searchText(r, 'ListAgentSearchText').toLowerCase(),
  };
  if (typeof r.ListingId === 'string') doc.ListingId = r.ListingId;
  if (typeof r.StandardStatus === 'string') doc.StandardStatus = r.StandardStatus;
  if (typeof r.PropertyType === 'string') doc.PropertyType = r.PropertyType;
  if (typeof r.City === 'string') doc.City = doc.CityGroup = r.City;
  if (typeof r.ListPrice === 'number') doc.ListPrice = r.ListPrice;
  if (typeof r.BedroomsTotal === 'number') doc.BedroomsTotal = r.BedroomsTotal;
  const modified = instantOf(r, 'ModificationTimestamp');
  if (modified !== null) doc.ModificationTimestamp = modified;
  const point = locationOf(r);
  if (point) doc.location = point;
  return doc;
}

/** Orama's search is synchronous unless async hooks or components are installed (none are here). */
function run(db: Db, params: Params): Results<Doc> {
  const out = search(db, params);
  if (out instanceof Promise) throw new Error('Orama search returned a promise; no async components are configured');
  return out;
}

/** Descending by a numeric field (absent last), ties by ListingKey ascending: Orama's custom sortBy. */
function descending(field: 'ListPrice' | 'ModificationTimestamp'): (a: [number, number, Doc], b: [number, number, Doc]) => number {
  return (a, b) => {
    const x = a[2][field];
    const y = b[2][field];
    if (x !== y) {
      if (x === undefined) return 1;
      if (y === undefined) return -1;
      return y - x;
    }
    return a[2].id < b[2].id ? -1 : a[2].id > b[2].id ? 1 : 0;
  };
}

interface Stats {
  n: number;
  prices: number[];
  size: number;
  median: number | null;
  p90: number | null;
}

class OramaPeer implements Peer {
  readonly name = `Orama ${version()}`;
  readonly loads = 'Property only';
  private db!: Db;
  private readonly plans = new Map<FamilyId, string>();

  async load(dir: string, log: (line: string) => void): Promise<void> {
    const db = create({
      schema: SCHEMA,
      // The sorted families use custom sortBy functions, which do not read Orama's sort indexes.
      sort: { enabled: false },
    });
    // forEachListing's callback is synchronous, and so is insertMultiple without async hooks.
    const insert = (docs: Doc[]): void => {
      if (insertMultiple(db, docs) instanceof Promise) throw new Error('Orama insertMultiple went asynchronous');
    };
    let batch: Doc[] = [];
    await forEachListing(dir, (r, i) => {
      batch.push(documentOf(r));
      if (batch.length === BATCH) {
        insert(batch);
        batch = [];
      }
      if ((i + 1) % 50_000 === 0) log(`orama: ${i + 1} listings`);
    });
    if (batch.length > 0) insert(batch);
    this.db = db;
    log(`orama: ${count(db)} documents`);
  }

  prepare<F extends FamilyId>(family: F, params: FamilyParams[F], _families: Families): (() => Answer) | string {
    const db = this.db;
    const keys = (p: Params) => (): Answer => ({ kind: 'keys', keys: run(db, p).hits.map((h) => h.id) });
    let p: Params;
    let answer: () => Answer;
    switch (family) {
      case 'Q1': {
        const q = params as FamilyParams['Q1'];
        p = {
          where: { StandardStatus: { eq: q.status }, ListPrice: { between: [q.priceMin, q.priceMax] }, BedroomsTotal: { gte: q.bedsMin } },
          sortBy: descending('ListPrice'),
          limit: q.top,
        };
        answer = keys(p);
        break;
      }
      case 'Q2': {
        const q = params as FamilyParams['Q2'];
        p = { term: q.terms.toLowerCase(), properties: ['keyword'], exact: true, threshold: 0, limit: q.top };
        answer = keys(p);
        break;
      }
      case 'Q3': {
        const q = params as FamilyParams['Q3'];
        p = { term: q.terms.toLowerCase(), properties: ['address'], threshold: 1, tolerance: 1, limit: q.top };
        answer = keys(p);
        break;
      }
      case 'Q4': {
        const q = params as FamilyParams['Q4'];
        p = {
          where: {
            location: { radius: { coordinates: { lat: q.lat, lon: q.lon }, value: q.radiusM, unit: 'm', inside: true } },
            StandardStatus: { eq: q.status },
          },
          sortBy: descending('ListPrice'),
          limit: q.top,
        };
        answer = keys(p);
        break;
      }
      case 'Q5': {
        const q = params as FamilyParams['Q5'];
        p = {
          where: { StandardStatus: { eq: q.status } },
          limit: 0,
          groupBy: {
            properties: ['CityGroup'],
            reduce: {
              getInitialValue: (size: number) => ({ n: 0, prices: [], size, median: null, p90: null }) as Stats as never,
              reducer: (_values, acc, hit, index) => {
                const s = acc as unknown as Stats;
                const price = (hit as unknown as { document: Doc }).document.ListPrice;
                s.n++;
                if (price !== undefined) s.prices.push(price);
                if (index === s.size - 1) {
                  s.prices.sort((a, b) => a - b);
                  s.median = nearestRank(s.prices, 50);
                  s.p90 = nearestRank(s.prices, 90);
                }
                return acc;
              },
            },
          },
        };
        const params5 = p;
        answer = (): Answer => {
          const groups: Group[] = (run(db, params5).groups ?? []).map((g) => {
            const s = g.result as unknown as Stats;
            return { City: g.values[0] as string, N: s.n, Median: s.median, P90: s.p90 };
          });
          return { kind: 'groups', groups: sortGroups(groups) };
        };
        break;
      }
      case 'Q6': {
        const q = params as FamilyParams['Q6'];
        p = {
          term: q.terms.toLowerCase(),
          properties: ['keyword'],
          exact: true,
          threshold: 0,
          where: {
            location: { radius: { coordinates: { lat: q.lat, lon: q.lon }, value: q.radiusM, unit: 'm', inside: true } },
            ListPrice: { between: [q.priceMin, q.priceMax] },
          },
          limit: q.top,
        };
        answer = keys(p);
        break;
      }
      case 'Q7': {
        const q = params as FamilyParams['Q7'];
        p = { term: q.terms.toLowerCase(), properties: ['agent'], exact: true, threshold: 0, limit: count(db) };
        answer = keys(p);
        break;
      }
      case 'Q8': {
        const q = params as FamilyParams['Q8'];
        p = { where: { StandardStatus: { eq: q.status } }, sortBy: descending('ModificationTimestamp'), offset: q.skip, limit: q.top };
        answer = keys(p);
        break;
      }
      case 'Q9': {
        const q = params as FamilyParams['Q9'];
        p = { where: { StandardStatus: { eq: q.status }, PropertyType: { eq: q.propertyType }, City: { eq: q.city } }, preflight: true };
        const params9 = p;
        answer = (): Answer => ({ kind: 'count', count: run(db, params9).count });
        break;
      }
      case 'Q10': {
        const q = params as FamilyParams['Q10'];
        p = { where: { ListingId: { eq: q.listingId } }, limit: 10 };
        answer = keys(p);
        break;
      }
      default:
        return `unknown family ${family as string}`;
    }
    this.plans.set(family, describe(p));
    return answer;
  }

  explain(_families: Families, family: FamilyId): string {
    return this.plans.get(family) ?? '';
  }
}

/** The search parameters, functions named rather than printed. */
function describe(p: Params): string {
  return `search ${JSON.stringify(p, (k, v: unknown) => (typeof v === 'function' ? `<${k} function>` : v))}`;
}

export default (): Peer => new OramaPeer();
