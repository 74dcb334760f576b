import { Uint32List } from '../util/uint32-list.js';

/** The scan operator: every row of the table that `accept` allows, ascending. */
export function collectScan(rowCount: number, accept: (row: number) => boolean): Uint32Array {
  const out = new Uint32List(Math.min(rowCount, 1024));
  for (let row = 0; row < rowCount; row++) if (accept(row)) out.push(row);
  return out.done();
}
