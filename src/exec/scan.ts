/** The scan operator: every row of the table that `accept` allows, ascending. */
export function collectScan(rowCount: number, accept: (row: number) => boolean): Uint32Array {
  const out: number[] = [];
  for (let row = 0; row < rowCount; row++) if (accept(row)) out.push(row);
  return Uint32Array.from(out);
}
