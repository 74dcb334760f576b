/**
 * One engine in the comparison. bench/compare/child.ts runs exactly one peer per child process:
 * load (timed, memory measured around it), then per family `prepare` once, the returned function
 * once for the answer that is checked, then timed over at least 30 runs after warm-up.
 */
import type { Answer, FamilyId, FamilyParams, Families } from './families.js';

export interface Peer {
  /** Shown in the tables, e.g. 'SQLite (better-sqlite3 12, FTS5, R*Tree)'. */
  readonly name: string;
  /** What the peer loads and indexes, for the report, e.g. 'Property only'. */
  readonly loads: string;
  /** Starts what the peer needs before its timed load (a database server), if anything. */
  setup?(): Promise<void>;
  /** Reads the data set directory and builds every index the peer uses. */
  load(dir: string, log: (line: string) => void): Promise<void>;
  /** Stops what setup started. */
  teardown?(): Promise<void>;
  /**
   * A function answering the family (prepared statements and the like made here, outside the
   * timing), or a string saying why the peer cannot express the family natively (reported n/a).
   */
  prepare<F extends FamilyId>(family: F, params: FamilyParams[F], families: Families): (() => Answer | Promise<Answer>) | string;
  /** How the peer answers a family (its plan), when it can say. */
  explain?(families: Families, family: FamilyId): string;
}

/** A peer module default-exports a factory, so the child process loads only the one it runs. */
export type PeerFactory = () => Peer;
