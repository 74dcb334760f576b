/**
 * Pages warmed before a change publishes (DESIGN.md, "Pages warmed before a change publishes"). A
 * page of whole records is fast when its rows' records are kept (src/store/record-cache.ts: a kept
 * record is copied, a fifth of what building one costs), and a record is kept the second time its
 * row is read. Under a stream of changes an ordered page moves: a listing changed gets a new row,
 * so every row after it in the order shifts, and a deep page newest first (`$orderby=
 * ModificationTimestamp desc&$skip=5000`) moves by about as many rows as the change replaced, onto
 * rows no query read before. Each new generation's first reads of such a page built its records
 * (about 90 of 100 at 100k listings, 0.4 ms and more) and the second built them again to keep them:
 * two slow runs in about eight.
 *
 * The engine remembers the requests whose run built at least WARM_MIN_BUILT records (up to
 * WARM_REQUESTS: past it, the one remembered longest ago goes), and before a change publishes its generation it
 * runs each that was asked on the generation the change replaces on the new one, taking the page's
 * rows without building records, and keeps those rows' records, a few between two check points. A
 * request not asked on a generation is forgotten at the next change (one that paged once is warmed
 * at most once), and so is one whose warming kept fewer than WARM_MIN_BUILT records (its page did
 * not move: after a compaction every page's records are built again, on a new lineage, and
 * warming the pages that stay would cost a run each per change for nothing). A compaction warms
 * its generation the same way before publishing it.
 */
import type { Generation } from '../access/generation.js';
import type { RecordSource } from '../exec/page.js';
import type { PlanRequest } from '../plan/planner.js';
import type { Steps } from '../util/steps.js';

/** Requests kept for warming at most. */
export const WARM_REQUESTS = 4;
/** Records a run must build for its request to be warmed: its page moved onto rows whose records were not kept. */
export const WARM_MIN_BUILT = 16;
/** Records kept between two check points. */
const KEEP_STEP = 8;

/** A request as the engine ran it: what it asked and for which sources. */
export interface WarmRequest {
  readonly request: PlanRequest;
  readonly sources: readonly string[] | undefined;
}

interface Entry extends WarmRequest {
  /** The generation the request was last asked on. */
  askedOn: number;
}

export class PageWarmer {
  /** The requests remembered, the least recently remembered first (few: looked up by a scan, no key string made per query). */
  private entries: Entry[] = [];
  /** Pages warmed so far (tests read it). */
  readonly done = { pages: 0 };

  /**
   * @param page the page `request` gives on `gen`, as rows without records built (null: not a
   *   page of plain records); may throw (the request is forgotten).
   */
  constructor(private readonly page: (warm: WarmRequest, gen: Generation) => RecordSource | null) {}

  /** Whether any request is remembered (the engine looks a request up only then). */
  get active(): boolean {
    return this.entries.length > 0;
  }

  /**
   * After a request ran on `gen` for `sources` and built `built` records: remembered when it built
   * enough, its generation noted when it is remembered already (no object made per query: the
   * engine calls this for every query once any request is remembered).
   */
  ran(request: PlanRequest, sources: readonly string[] | undefined, gen: Generation, built: number): void {
    if (request.navigation !== undefined || request.countOnly === true) return;
    for (const entry of this.entries) {
      if (sameRequest(entry, request, sources)) {
        entry.askedOn = gen.id;
        return;
      }
    }
    if (built < WARM_MIN_BUILT) return;
    if (this.entries.length >= WARM_REQUESTS) this.entries.shift();
    this.entries.push({ request, sources, askedOn: gen.id });
  }

  /** Steps that keep, for each request asked on `previous`, the records of its page on `next` (never throw). */
  *steps(previous: Generation, next: Generation): Steps<void> {
    // a request not asked on the generation the change replaces is forgotten
    this.entries = this.entries.filter((e) => e.askedOn === previous.id);
    for (const entry of [...this.entries]) {
      let page: RecordSource | null;
      try {
        page = this.page(entry, next);
      } catch {
        // a request that cannot run on the new generation is not warmed again
        this.forget(entry);
        continue;
      }
      yield;
      if (page === null) {
        // not a page of plain records ($expand, $ignorenulls: built per response): nothing to keep
        this.forget(entry);
        continue;
      }
      this.done.pages++;
      const { table, fields, nowMs, rows } = page;
      let kept = 0;
      for (let i = 0; i < rows.length; i++) {
        if (table.keepRecord(rows[i], fields, nowMs)) kept++;
        if (i % KEEP_STEP === KEEP_STEP - 1) yield;
      }
      // a page that did not move onto rows whose records were not kept is not warmed again (until a run builds enough again)
      if (kept < WARM_MIN_BUILT) this.forget(entry);
    }
  }

  /** Drops `entry` (queries may have remembered others meanwhile: the list is filtered, not replaced). */
  private forget(entry: Entry): void {
    this.entries = this.entries.filter((e) => e !== entry);
  }
}

/** The same request for the same sources (texts compared first: most differ in length). */
function sameRequest(a: WarmRequest, request: PlanRequest, sources: readonly string[] | undefined): boolean {
  const x = a.request;
  if (x.text !== request.text || x.resource !== request.resource || x.maxPageSize !== request.maxPageSize) return false;
  if (a.sources === sources) return true;
  return a.sources !== undefined && sources !== undefined && a.sources.length === sources.length && a.sources.every((s, i) => s === sources[i]);
}
