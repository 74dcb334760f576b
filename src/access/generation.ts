/**
 * One version of the data: what a query reads, start to end. Changes publish a new one
 * (src/live/change.ts); queries, explain and the service read the one they were given.
 */
import type { Store } from '../store/store.js';
import type { StoreAccess } from './access.js';

export interface Generation {
  /** 0 as loaded, then one more per change or compaction published. */
  readonly id: number;
  readonly store: Store;
  readonly access: StoreAccess;
}
