/**
 * When and how the newest generation is compacted (src/live/compact.ts does the rewriting): the
 * generation whose indexes cover exactly its rows (loaded, opened from a snapshot, or compacted)
 * is the base; a compaction rewrites the newest generation's live rows into a new base and
 * publishes it. After each change it starts one by itself once the rows replaced, removed or added
 * since the base pass `fraction` of a table (false: only when asked).
 */
import { StoreAccess } from '../access/access.js';
import type { Generation } from '../access/generation.js';
import { RESOURCE_NAMES, type ResourceName } from '../schema/types.js';
import { SEARCH_FIELDS, type SearchFieldName } from '../schema/search-fields.js';
import { hasLexicon, lexiconSteps } from '../search/lexicon.js';
import { termsWithImpactOrders } from '../search/ranked.js';
import { runYielding, type Steps } from '../util/steps.js';
import type { ChangeWriter } from './change.js';
import {
  carriedAccessSteps,
  compactInputSteps,
  compactNow,
  compactTablesSteps,
  partsOf,
  EVENT_RETENTION_MS,
  withTreesNow,
  worthCompacting,
  type Compacted,
  type CompactedFrom,
  type LogRetention,
} from './compact.js';
import { COMPACT_THREAD_MIN_ROWS, compactOnThread } from './compact-thread.js';
import type { Generations } from './generations.js';

/** Default EngineOpenOptions.compactFraction. */
export const COMPACT_FRACTION = 0.25;

export class Compactor {
  /** The base generation's id. */
  private baseId = 0;
  /** Row counts of the base generation's tables (compaction compares the rows appended since). */
  private baseRows!: Record<ResourceName, number>;
  /** Whether a compaction this compactor started itself is under way. */
  private running = false;
  /** Compactions run so far, and the seconds they took in all (the service's metrics). */
  done = { count: 0, seconds: 0 };

  constructor(
    private readonly generations: Generations,
    private readonly writer: ChangeWriter,
    private readonly fraction: number | false = COMPACT_FRACTION,
    /** The EntityEvent log's retention (EVENT_RETENTION_MS) and the engine's clock. */
    private readonly log: { readonly retentionMs: number; readonly clock: () => number } = { retentionMs: EVENT_RETENTION_MS, clock: () => Date.now() },
    /** Steps run on the compacted generation before it is published (the pages warmed: src/live/warm.ts). */
    private readonly prepare?: (previous: Generation, next: Generation) => Steps<void>,
  ) {
    this.setBase(generations.current);
  }

  /** The data of `gen` with indexes that cover exactly its rows: as they are for the base, else compacted now (synchronously). */
  compactedImage(gen: Generation): Compacted {
    if (gen.id === this.baseId) return { store: gen.store, indexes: gen.access.base };
    return compactNow(gen.store, gen.access, this.retention());
  }

  /**
   * Compacts the newest generation in steps between queries, after any change already asked for
   * (changes asked for meanwhile wait for it), and publishes it.
   */
  compact(): Promise<void> {
    return this.writer.exclusive(async () => {
      const g = this.generations.current;
      if (g.id === this.baseId) return;
      const started = performance.now();
      const result = await this.compacted(g);
      const tables = await runYielding(carriedAccessSteps(g.access, result));
      // the new indexes' lexicons, where the old ones' were in use: the first address search after it would build one at once
      for (const f of SEARCH_FIELDS) if (hasLexicon(g.access.search[f].base)) await runYielding(lexiconSteps(result.indexes.search[f]));
      this.done = { count: this.done.count + 1, seconds: this.done.seconds + (performance.now() - started) / 1000 };
      const { store, indexes } = result;
      const compacted: Generation = { id: this.generations.nextId(), store, access: new StoreAccess(store, indexes, tables) };
      if (this.prepare !== undefined) await runYielding(this.prepare(g, compacted));
      this.writer.rebase();
      this.setBase(compacted);
      this.generations.publish(compacted);
    });
  }

  /**
   * The compaction of `gen`: on a worker thread (compact-thread.ts) from COMPACT_THREAD_MIN_ROWS
   * listings, in steps between queries below that or when no thread could do it.
   */
  private async compacted(gen: Generation): Promise<CompactedFrom> {
    const input = await runYielding(compactInputSteps(gen.store, gen.access, this.retention()));
    if (gen.store.Property.rowCount >= COMPACT_THREAD_MIN_ROWS) {
      const hotTerms = {} as Record<SearchFieldName, string[]>;
      for (const f of SEARCH_FIELDS) hotTerms[f] = termsWithImpactOrders(gen.access.search[f].base);
      const done = await compactOnThread(gen.store, input, hotTerms);
      if (done !== null) return done;
    }
    return withTreesNow(partsOf(gen.store, await runYielding(compactTablesSteps(input))));
  }

  /** After a change: starts a compaction when the newest generation carries enough dead and appended rows. */
  afterChange(): void {
    if (this.fraction === false || this.running) return;
    const g = this.generations.current;
    if (!worthCompacting(g.store, g.access, this.baseRows, this.fraction)) return;
    this.running = true;
    this.compact().then(
      () => (this.running = false),
      (e: unknown) => {
        this.running = false;
        // A defect, not bad input (the data was valid when it went in): say so, keep serving.
        process.emitWarning(`reso-engine: compaction failed, the engine keeps its uncompacted data (${e instanceof Error ? e.message : String(e)})`);
      },
    );
  }

  private retention(): LogRetention {
    return { retentionMs: this.log.retentionMs, nowMs: this.log.clock() };
  }

  private setBase(g: Generation): void {
    this.baseId = g.id;
    this.baseRows = Object.fromEntries(RESOURCE_NAMES.map((r) => [r, g.store.table(r).rowCount])) as Record<ResourceName, number>;
  }
}
