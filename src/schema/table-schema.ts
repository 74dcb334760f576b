/**
 * The schema of one loaded resource: the declared fields its records carry, the derived fields,
 * and its local fields, in a stable order — the key first, then declared and derived fields by
 * name (ordinal), then local fields in the order the data first carried them. Records, $metadata
 * and `$select=*` all use this order.
 */
import { compareOrdinal } from './catalog.js';
import type { FieldDef, ResourceName } from './types.js';

export class TableSchema {
  readonly fields: readonly FieldDef[];
  private readonly positions: ReadonlyMap<string, number>;

  constructor(
    readonly resource: ResourceName,
    readonly key: string,
    declared: readonly FieldDef[],
    local: readonly FieldDef[],
  ) {
    const keyField = declared.find((f) => f.name === key);
    if (!keyField) throw new Error(`${resource} schema without its key ${key}`);
    const rest = declared.filter((f) => f !== keyField).sort((a, b) => compareOrdinal(a.name, b.name));
    this.fields = Object.freeze([keyField, ...rest, ...local]);
    this.positions = new Map(this.fields.map((f, i) => [f.name, i]));
  }

  field(name: string): FieldDef | undefined {
    const i = this.positions.get(name);
    return i === undefined ? undefined : this.fields[i];
  }

  /** Position of the field in `fields`, or -1. */
  indexOf(name: string): number {
    return this.positions.get(name) ?? -1;
  }

  get localFields(): FieldDef[] {
    return this.fields.filter((f) => f.origin === 'local');
  }
}
