/**
 * The SQLite peer: better-sqlite3 (synchronous, in-process) over an in-memory database, set up the
 * way a competent user would for a read-only analytical copy of Property. Only Property is loaded.
 *
 * Pragmas: journal_mode=OFF (nothing to roll back to: the copy is rebuilt from the files),
 * synchronous=OFF, temp_store=MEMORY (ORDER BY / window sorts stay in RAM), cache_size 256 MiB,
 * locking_mode=EXCLUSIVE (one connection). The whole load is ONE transaction with prepared inserts.
 *
 * Schema
 *   listing(id INTEGER PRIMARY KEY, ListingKey, ListingId, StandardStatus, PropertyType, City,
 *           ListPrice REAL, BedroomsTotal INTEGER, ModificationTimestamp INTEGER (epoch ms, the
 *           written offset honoured), lat REAL, lon REAL (NULL when reso-engine has no Location))
 *           -- id is the rowid every other table joins on.
 *   kw, addr, agent: FTS5, one table per search field (KeywordSearchText, RawAddressSearchText,
 *           ListAgentSearchText), so BM25 statistics (N, document frequency, average length) are
 *           per field as in reso-engine; rowid = listing id. Contentless (content=''): only the
 *           inverted index and the per-row token counts BM25 needs are kept, not a second copy of
 *           the text. Tokenizer unicode61 remove_diacritics 2 (letters/digits, case-folded, marks
 *           removed, ~ SERVICE.md §4). Every listing gets a row, even with empty text, so N =
 *           listings as in the spec. After the load each is merged into one b-tree ('optimize').
 *
 * B-tree indexes, built after the bulk insert (inside the load transaction), one per family with a
 * selective equality/range/order to serve. DESC columns are used where a family sorts descending
 * with an ascending ListingKey tie-break, so the index order IS the result order and LIMIT stops
 * the walk early (no sort step):
 *   (StandardStatus, ListPrice DESC, ListingKey)              Q1, Q4: status equality, ordered walk
 *                                                            that stops once `top` rows pass the rest.
 *   (StandardStatus, ModificationTimestamp DESC, ListingKey) Q8: covering; OFFSET walks index entries only.
 *   (StandardStatus, PropertyType, City)                     Q9: covering count of one index range.
 *   (StandardStatus, City, ListPrice)                        Q5: covering, and already in the window's
 *                                                            PARTITION BY City ORDER BY ListPrice order
 *                                                            (the plan has no sort for the window).
 *   (ListingId, ListingKey)                                  Q10: covering point lookup.
 * Then ANALYZE (with analysis_limit=1000, the documented cheap form) so the planner has statistics.
 *
 * Geo: no R*Tree. An R*Tree (rtree(id, minLat, maxLat, minLon, maxLon), queried with the circle's
 * bounding box, then the exact distance()) was built and measured and lost to plain B-tree plans
 * for both geo families, so it is not built (an index no family uses would only inflate the load):
 *   Q4 at 100k: R*Tree box drives 10.1 ms, (StandardStatus, ListPrice DESC) walk 1.7 ms;
 *      at 1M:   R*Tree box drives 55 ms (43k points in the box, all joined and sorted), walk 1.5 ms
 *      (the walk reads about top / (share of Active rows inside the circle) rows, independent of size).
 *   Q6 ('ocean', 1M): text drives + R*Tree probe per match 51 ms, text drives + lat/lon test on the
 *      listing row 22 ms, R*Tree drives + FTS5 MATCH per candidate 985 ms.
 * Caveat: for a circle holding few matching listings the Q4 walk would read every Active row, where
 * an R*Tree would win; with these parameters (a city centre) the walk is the faster exact plan.
 * distance() is a deterministic JS function (families' distanceMeters: reso-engine's haversine, so
 * the radius test is exact); the box on the listing's own lat/lon columns runs first and is widened
 * by 1e-9 degrees (whole longitude range across a pole or the antimeridian), so it only prunes.
 *
 * Families (? = parameters bound at run time, from FamilyParams)
 *   Q1  SELECT ListingKey FROM listing WHERE StandardStatus=? AND ListPrice BETWEEN ? AND ?
 *       AND BedroomsTotal>=? ORDER BY ListPrice DESC, ListingKey LIMIT ?   (NULL sorts last in DESC)
 *   Q2  SELECT l.ListingKey FROM (SELECT rowid AS id, bm25(kw) AS score FROM kw
 *       WHERE kw MATCH '"pool" "granite"' ORDER BY score LIMIT ?) k JOIN listing l ON l.id=k.id
 *       ORDER BY k.score, l.ListingKey   (implicit AND of the quoted distinct tokens; bm25() is lower-
 *       is-better; ranking inside FTS5 first and joining only the top rows measured ~30% faster than
 *       joining every match; rows tied with the last one kept may be cut either way)
 *   Q3  the same over addr with '"t1" OR "t2" OR ...'  -- see limitations
 *   Q4  SELECT ListingKey FROM listing INDEXED BY listing_status_price WHERE StandardStatus=? AND
 *       lat BETWEEN ? AND ? AND lon BETWEEN ? AND ? AND distance(lat,lon,?,?)<=?
 *       ORDER BY ListPrice DESC, ListingKey LIMIT ?   (the planner picks that index by itself; it is
 *       pinned so the plan cannot flip between data set sizes)
 *   Q5  window functions over the covering index: row_number(), count(*) and count(ListPrice) over
 *       one window (PARTITION BY City ORDER BY ListPrice, whole-partition frame); NULL prices sort
 *       first, so the non-null value of rank k is row (N - nv) + k; GROUP BY City then picks the
 *       rows at ranks ceil(p·nv/100) for p = 50, 90 in integer arithmetic ((p·nv+99)/100, exact,
 *       as reso-engine computes it); only each city's first row and those rows reach the GROUP BY.
 *       Groups ordered with sortGroups. (cume_dist() over a (City, ListPrice IS NULL) partition
 *       measured ~10% faster but needs a sort and a floating-point argument; not worth it.)
 *   Q6  SELECT l.ListingKey FROM kw CROSS JOIN listing l ON l.id=kw.rowid WHERE kw MATCH ? AND <box>
 *       AND ListPrice BETWEEN ? AND ? AND distance(...)<=? ORDER BY bm25(kw), ListingKey LIMIT ?
 *   Q7  SELECT l.ListingKey FROM agent JOIN listing l ON l.id=agent.rowid WHERE agent MATCH ?
 *   Q8  SELECT ListingKey FROM listing WHERE StandardStatus=? ORDER BY ModificationTimestamp DESC,
 *       ListingKey LIMIT ? OFFSET ?
 *   Q9  SELECT count(*) FROM listing WHERE StandardStatus=? AND PropertyType=? AND City=?
 *   Q10 SELECT ListingKey FROM listing WHERE ListingId=? ORDER BY ListingKey
 *
 * Limitations (differences from reso-engine that are SQLite's, not the benchmark's)
 *   - FTS5's bm25() uses idf = ln((N-n+0.5)/(n+0.5)), replaced by 1e-6 when a term is in half the
 *     rows or more, not SERVICE.md's ln(1 + (N-n+0.5)/(n+0.5)); k1 = 1.2 and b = 0.75 are the same.
 *     Rankings of the ranked families (Q2, Q3, Q6) differ, most for common terms: 'pool' and
 *     'granite' are each in more than half the listings, so Q2 ranks by length normalisation and
 *     term frequency alone. better-sqlite3 cannot register an FTS5 auxiliary (ranking) function, so
 *     this is not fixable from JS. Ties are broken by ListingKey.
 *   - Q3: FTS5 has no "at least m of the terms" operator (an OR of every m-subset AND would give the
 *     match set but count terms several times in bm25). The query is an OR of the quoted terms,
 *     ranked by bm25, which favours rows matching more terms; the checker measures recall@k.
 *     reso-engine's USPS suffix/directional normalisation (Street = St), type-ahead prefix on the
 *     last term and one-edit fuzzy matching are deliberately not emulated: a SQLite user has none.
 *   - unicode61 is not NFKD: compatibility characters (ligatures, full-width forms) tokenise
 *     differently from reso-engine; for ASCII text, all of the generated data, they are identical.
 */
import Database from 'better-sqlite3';
import { createRequire } from 'node:module';
import type { Peer, PeerFactory } from '../peer.js';
import {
  distanceMeters,
  forEachListing,
  instantOf,
  locationOf,
  searchText,
  sortGroups,
  type Answer,
  type FamilyId,
  type FamilyParams,
  type Families,
  type Group,
  type Rec,
} from '../families.js';

const BETTER_SQLITE3_VERSION = (createRequire(import.meta.url)('better-sqlite3/package.json') as { version: string }).version;
const EARTH_RADIUS_M = 6_371_008.8;
const DEG = 180 / Math.PI;

const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const int = (v: unknown): number | null => (typeof v === 'number' && Number.isInteger(v) ? v : null);

/** The distinct tokens of a query, each quoted as an FTS5 string (so no token is read as an operator). */
function quotedTerms(terms: string): string[] {
  const tokens = new Set<string>();
  for (const t of terms
    .normalize('NFKD')
    .replace(/\p{M}+/gu, '')
    .toLowerCase()
    .split(/[^\p{L}\p{N}]+/u))
    if (t) tokens.add(t);
  return [...tokens].map((t) => `"${t.replaceAll('"', '""')}"`);
}

/**
 * The lat/lon box holding every point within `radiusM` of the centre on the sphere (the tangent
 * meridians at asin(sin d / cos lat)), widened by a hair for rounding; the whole longitude range
 * when it reaches a pole or crosses the antimeridian (still a superset: distance() decides).
 */
function boundingBox(lat: number, lon: number, radiusM: number): [number, number, number, number] {
  const d = radiusM / EARTH_RADIUS_M;
  const eps = 1e-9;
  const dLat = d * DEG + eps;
  const minLat = lat - dLat;
  const maxLat = lat + dLat;
  if (minLat <= -90 || maxLat >= 90 || d >= Math.PI / 2) return [Math.max(minLat, -90), Math.min(maxLat, 90), -180, 180];
  const dLon = Math.asin(Math.min(1, Math.sin(d) / Math.cos(lat / DEG))) * DEG + eps;
  const minLon = lon - dLon;
  const maxLon = lon + dLon;
  if (minLon < -180 || maxLon > 180) return [minLat, maxLat, -180, 180];
  return [minLat, maxLat, minLon, maxLon];
}

/** The circle's bounding box on the listing's own coordinates (NULL points fail it), before the exact distance(). */
const BOX = 'l.lat BETWEEN :minLat AND :maxLat AND l.lon BETWEEN :minLon AND :maxLon';

class SqlitePeer implements Peer {
  readonly name: string;
  readonly loads = 'Property only';
  private readonly db: Database.Database;

  constructor() {
    this.db = new Database(':memory:');
    const version = this.db.prepare('SELECT sqlite_version()').pluck().get() as string;
    this.name = `SQLite ${version} (better-sqlite3 ${BETTER_SQLITE3_VERSION}, B-tree + FTS5, in memory)`;
    this.db.pragma('journal_mode = OFF');
    this.db.pragma('synchronous = OFF');
    this.db.pragma('temp_store = MEMORY');
    this.db.pragma('cache_size = -262144');
    this.db.pragma('locking_mode = EXCLUSIVE');
    this.db.function('distance', { deterministic: true }, (lat: unknown, lon: unknown, qLat: unknown, qLon: unknown) =>
      typeof lat === 'number' && typeof lon === 'number' && typeof qLat === 'number' && typeof qLon === 'number'
        ? distanceMeters({ lat, lon }, { lat: qLat, lon: qLon })
        : null,
    );
  }

  async load(dir: string, log: (line: string) => void): Promise<void> {
    const db = this.db;
    const started = performance.now();
    const since = (): string => `${((performance.now() - started) / 1000).toFixed(1)} s`;
    db.exec(`
      CREATE TABLE listing (
        id INTEGER PRIMARY KEY,
        ListingKey TEXT NOT NULL,
        ListingId TEXT,
        StandardStatus TEXT,
        PropertyType TEXT,
        City TEXT,
        ListPrice REAL,
        BedroomsTotal INTEGER,
        ModificationTimestamp INTEGER,
        lat REAL,
        lon REAL
      );
      CREATE VIRTUAL TABLE kw USING fts5(text, content='', tokenize='unicode61 remove_diacritics 2');
      CREATE VIRTUAL TABLE addr USING fts5(text, content='', tokenize='unicode61 remove_diacritics 2');
      CREATE VIRTUAL TABLE agent USING fts5(text, content='', tokenize='unicode61 remove_diacritics 2');
    `);
    const insert = db.prepare(`INSERT INTO listing VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`);
    const insertKw = db.prepare(`INSERT INTO kw(rowid, text) VALUES (?, ?)`);
    const insertAddr = db.prepare(`INSERT INTO addr(rowid, text) VALUES (?, ?)`);
    const insertAgent = db.prepare(`INSERT INTO agent(rowid, text) VALUES (?, ?)`);
    db.exec('BEGIN');
    try {
      const rows = await forEachListing(dir, (r: Rec, index: number) => {
        const id = index + 1;
        const point = locationOf(r);
        insert.run(
          id,
          str(r.ListingKey),
          str(r.ListingId),
          str(r.StandardStatus),
          str(r.PropertyType),
          str(r.City),
          num(r.ListPrice),
          int(r.BedroomsTotal),
          instantOf(r, 'ModificationTimestamp'),
          point ? point.lat : null,
          point ? point.lon : null,
        );
        insertKw.run(id, searchText(r, 'KeywordSearchText'));
        insertAddr.run(id, searchText(r, 'RawAddressSearchText'));
        insertAgent.run(id, searchText(r, 'ListAgentSearchText'));
        if (id % 100_000 === 0) log(`sqlite: ${id.toLocaleString('en-US')} listings inserted (${since()})`);
      });
      log(`sqlite: ${rows.toLocaleString('en-US')} listings inserted (${since()}); building B-tree indexes`);
      db.exec(`
        CREATE INDEX listing_status_price ON listing (StandardStatus, ListPrice DESC, ListingKey);
        CREATE INDEX listing_status_modified ON listing (StandardStatus, ModificationTimestamp DESC, ListingKey);
        CREATE INDEX listing_status_type_city ON listing (StandardStatus, PropertyType, City);
        CREATE INDEX listing_status_city_price ON listing (StandardStatus, City, ListPrice);
        CREATE INDEX listing_id ON listing (ListingId, ListingKey);
      `);
      log(`sqlite: B-tree indexes built (${since()}); merging the FTS5 indexes`);
      for (const fts of ['kw', 'addr', 'agent']) db.exec(`INSERT INTO ${fts}(${fts}) VALUES ('optimize')`);
      db.exec('PRAGMA analysis_limit = 1000; ANALYZE;');
      db.exec('COMMIT');
    } catch (e) {
      if (db.inTransaction) db.exec('ROLLBACK');
      throw e;
    }
    const pages = db.pragma('page_count', { simple: true }) as number;
    const pageSize = db.pragma('page_size', { simple: true }) as number;
    log(`sqlite: loaded in ${since()}, database ${((pages * pageSize) / 2 ** 20).toFixed(0)} MiB`);
  }

  prepare<F extends FamilyId>(family: F, params: FamilyParams[F], _families: Families): (() => Answer) | string {
    const q = statementOf(family, params);
    if (typeof q === 'string') return q;
    const args = q.args;
    switch (q.shape) {
      case 'keys': {
        const s = this.db.prepare(q.sql).pluck();
        return () => ({ kind: 'keys', keys: s.all(...args) as string[] });
      }
      case 'count': {
        const s = this.db.prepare(q.sql).pluck();
        return () => ({ kind: 'count', count: s.get(...args) as number });
      }
      case 'groups': {
        const s = this.db.prepare(q.sql);
        return () => ({ kind: 'groups', groups: sortGroups(s.all(...args) as Group[]) });
      }
    }
  }

  /** SQLite's EXPLAIN QUERY PLAN of the family's statement with its parameters bound. */
  explain(families: Families, family: FamilyId): string {
    const q = statementOf(family, families.params[family]);
    if (typeof q === 'string') return q;
    const rows = this.db.prepare(`EXPLAIN QUERY PLAN ${q.sql}`).all(...q.args) as { detail: string }[];
    return rows.map((r) => r.detail).join('; ');
  }
}

/** A family's SQL, its bound parameters (positional, or one object of named ones) and its answer's shape. */
interface Statement {
  readonly sql: string;
  readonly args: unknown[];
  readonly shape: Answer['kind'];
}

function statementOf<F extends FamilyId>(family: F, params: FamilyParams[F]): Statement | string {
  const p = params;
  switch (family) {
    case 'Q1': {
      const q = p as FamilyParams['Q1'];
      return {
        sql: `SELECT ListingKey FROM listing
              WHERE StandardStatus = ? AND ListPrice BETWEEN ? AND ? AND BedroomsTotal >= ?
              ORDER BY ListPrice DESC, ListingKey LIMIT ?`,
        args: [q.status, q.priceMin, q.priceMax, q.bedsMin, q.top],
        shape: 'keys',
      };
    }
    case 'Q2':
    case 'Q3': {
      const q = p as FamilyParams['Q2'] | FamilyParams['Q3'];
      // Q2: every term (FTS5's implicit AND); Q3: any term, ranked (see the limitations above).
      const match = quotedTerms(q.terms).join(family === 'Q2' ? ' ' : ' OR ');
      if (!match) return 'no search terms';
      const fts = family === 'Q2' ? 'kw' : 'addr';
      return {
        sql: `SELECT l.ListingKey
              FROM (SELECT rowid AS id, bm25(${fts}) AS score FROM ${fts} WHERE ${fts} MATCH ? ORDER BY score LIMIT ?) AS k
              JOIN listing l ON l.id = k.id ORDER BY k.score, l.ListingKey`,
        args: [match, q.top],
        shape: 'keys',
      };
    }
    case 'Q4': {
      const q = p as FamilyParams['Q4'];
      const [minLat, maxLat, minLon, maxLon] = boundingBox(q.lat, q.lon, q.radiusM);
      return {
        sql: `SELECT l.ListingKey FROM listing l INDEXED BY listing_status_price
              WHERE l.StandardStatus = :status AND ${BOX} AND distance(l.lat, l.lon, :lat, :lon) <= :radius
              ORDER BY l.ListPrice DESC, l.ListingKey LIMIT :top`,
        args: [{ minLat, maxLat, minLon, maxLon, status: q.status, lat: q.lat, lon: q.lon, radius: q.radiusM, top: q.top }],
        shape: 'keys',
      };
    }
    case 'Q5': {
      const q = p as FamilyParams['Q5'];
      return {
        // Only the first row of each city (it carries N) and the rows at the two ranks reach the GROUP BY.
        sql: `SELECT City, max(N) AS N,
                     max(CASE WHEN nv > 0 AND rn = N - nv + (50 * nv + 99) / 100 THEN ListPrice END) AS Median,
                     max(CASE WHEN nv > 0 AND rn = N - nv + (90 * nv + 99) / 100 THEN ListPrice END) AS P90
              FROM (
                SELECT City, ListPrice, row_number() OVER w AS rn, count(*) OVER w AS N, count(ListPrice) OVER w AS nv
                FROM listing WHERE StandardStatus = ?
                WINDOW w AS (PARTITION BY City ORDER BY ListPrice ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
              )
              WHERE rn = 1 OR (nv > 0 AND rn IN (N - nv + (50 * nv + 99) / 100, N - nv + (90 * nv + 99) / 100))
              GROUP BY City`,
        args: [q.status],
        shape: 'groups',
      };
    }
    case 'Q6': {
      const q = p as FamilyParams['Q6'];
      const match = quotedTerms(q.terms).join(' ');
      if (!match) return 'no search terms';
      const [minLat, maxLat, minLon, maxLon] = boundingBox(q.lat, q.lon, q.radiusM);
      return {
        sql: `SELECT l.ListingKey FROM kw CROSS JOIN listing l ON l.id = kw.rowid
              WHERE kw MATCH :match AND ${BOX} AND l.ListPrice BETWEEN :priceMin AND :priceMax
                AND distance(l.lat, l.lon, :lat, :lon) <= :radius
              ORDER BY bm25(kw), l.ListingKey LIMIT :top`,
        args: [
          {
            match,
            minLat,
            maxLat,
            minLon,
            maxLon,
            priceMin: q.priceMin,
            priceMax: q.priceMax,
            lat: q.lat,
            lon: q.lon,
            radius: q.radiusM,
            top: q.top,
          },
        ],
        shape: 'keys',
      };
    }
    case 'Q7': {
      const q = p as FamilyParams['Q7'];
      const match = quotedTerms(q.terms).join(' ');
      if (!match) return 'no search terms';
      return { sql: `SELECT l.ListingKey FROM agent JOIN listing l ON l.id = agent.rowid WHERE agent MATCH ?`, args: [match], shape: 'keys' };
    }
    case 'Q8': {
      const q = p as FamilyParams['Q8'];
      return {
        sql: `SELECT ListingKey FROM listing WHERE StandardStatus = ?
              ORDER BY ModificationTimestamp DESC, ListingKey LIMIT ? OFFSET ?`,
        args: [q.status, q.top, q.skip],
        shape: 'keys',
      };
    }
    case 'Q9': {
      const q = p as FamilyParams['Q9'];
      return {
        sql: `SELECT count(*) FROM listing WHERE StandardStatus = ? AND PropertyType = ? AND City = ?`,
        args: [q.status, q.propertyType, q.city],
        shape: 'count',
      };
    }
    case 'Q10': {
      const q = p as FamilyParams['Q10'];
      return { sql: `SELECT ListingKey FROM listing WHERE ListingId = ? ORDER BY ListingKey`, args: [q.listingId], shape: 'keys' };
    }
    default:
      return `unknown family ${family as string}`;
  }
}

const factory: PeerFactory = () => new SqlitePeer();
export default factory;
