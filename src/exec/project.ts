/**
 * The projection operator: one record of the response, with the selected fields in schema order,
 * nulls dropped under $ignorenulls=true (an absent collection is `[]`, not null, and stays), the
 * navigation links of navigation properties $select names, and the expansions after them.
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
  base: string,
): Record<string, JsonValue> {
  const record = table.record(row, plan.select ?? undefined, nowMs);
  if (plan.ignoreNulls) {
    for (const k of Object.keys(record)) if (record[k] === null) delete record[k];
  }
  if (plan.links.length) {
    // relative to the service root, like the context URL (absolute when the caller gave a base)
    const entity = `${base}${plan.resource}('${encodeURIComponent(table.keyOf(row).replace(/'/g, "''"))}')`;
    for (const name of plan.links) record[`${name}@odata.navigationLink`] = `${entity}/${name}`;
  }
  expansions?.expandInto(record, row, { nowMs, ignoreNulls: plan.ignoreNulls, visible, visibleOf });
  return record;
}
