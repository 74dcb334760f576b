/**
 * The projection operator: one record of the response, with the selected fields in schema order,
 * nulls dropped under $ignorenulls=true, and the expansions added after the fields.
 */
import type { Plan } from '../plan/plan.js';
import type { JsonValue } from '../store/columns.js';
import type { Table } from '../store/table.js';
import type { ExpandEnv, Expansions } from './expand.js';

export function project(
  plan: Plan,
  table: Table,
  row: number,
  nowMs: number,
  expansions: Expansions | null,
  visible: ((row: number) => boolean) | null,
  visibleOf: ExpandEnv['visibleOf'],
): Record<string, JsonValue> {
  const record = table.record(row, plan.select ?? undefined, nowMs);
  if (plan.ignoreNulls) {
    for (const k of Object.keys(record)) if (record[k] === null) delete record[k];
  }
  expansions?.expandInto(record, row, { nowMs, ignoreNulls: plan.ignoreNulls, visible, visibleOf });
  return record;
}
