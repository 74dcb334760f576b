/**
 * The RESO Lookup resource's rows, as far as the schema knows them: the Data Dictionary's standard
 * values of each lookup (src/schema/dd-lookups.ts, generated), the LookupName a field's values are
 * listed under (the short name `$metadata` annotates it with), and the row's key.
 */
import { createHash } from 'node:crypto';
import { DD_LOOKUPS, DD_LOOKUPS_GENERATED_ON } from './dd-lookups.js';
import type { FieldDef } from './types.js';

/** One standard value of a lookup: the human-friendly value (what data carries) and the legacy OData enum member name. */
export interface StandardLookupValue {
  readonly value: string;
  readonly legacy: string;
}

/**
 * The ModificationTimestamp of a standard value's row: when the DD reference metadata the table
 * was generated from was published (a constant: the standard values change only with it).
 */
export const STANDARD_LOOKUP_TIMESTAMP = DD_LOOKUPS_GENERATED_ON;

function parse(): ReadonlyMap<string, ReadonlyMap<string, StandardLookupValue>> {
  const out = new Map<string, Map<string, StandardLookupValue>>();
  let current: Map<string, StandardLookupValue> | null = null;
  for (const line of DD_LOOKUPS.split('\n')) {
    if (line === '') continue;
    if (!line.startsWith('  ')) {
      current = new Map();
      out.set(line, current);
      continue;
    }
    const bar = line.indexOf('|');
    const v = { legacy: line.slice(2, bar), value: line.slice(bar + 1) };
    current!.set(v.value, v);
  }
  return out;
}

/** Standard values by LookupName, then by value (in the DD's order). */
export const STANDARD_LOOKUPS = parse();

/** The LookupName a lookup field's values are listed under: its lookup's short name, as `$metadata` annotates the field (`StandardStatus`). */
export function lookupNameOf(field: Pick<FieldDef, 'lookup'>): string | null {
  const lookup = field.lookup;
  if (lookup === null) return null;
  const i = lookup.lastIndexOf('.');
  return i < 0 ? lookup : lookup.slice(i + 1);
}

/**
 * The keys made so far by LookupName and value: a change looks up the key of every lookup value
 * its new rows use (to find the ones the Lookup table lacks), and a SHA-256 per value was most of
 * that. Bounded: past LOOKUP_KEYS_KEPT keys it starts again.
 */
const lookupKeys = new Map<string, Map<string, string>>();
let lookupKeyCount = 0;
const LOOKUP_KEYS_KEPT = 1 << 18;

/**
 * A Lookup row's key: the first 16 hex digits of SHA-256 over LookupName, a NUL and the value. A
 * function of the pair alone, so the same value has the same key in every run, data set, snapshot
 * and generation, and a client can compute it; opaque, URL-safe and of one length.
 */
export function lookupKey(name: string, value: string): string {
  let keys = lookupKeys.get(name);
  if (keys === undefined) lookupKeys.set(name, (keys = new Map<string, string>()));
  let key = keys.get(value);
  if (key === undefined) {
    key = createHash('sha256').update(`${name}\u0000${value}`).digest('hex').slice(0, 16);
    if (++lookupKeyCount > LOOKUP_KEYS_KEPT) {
      lookupKeys.clear();
      lookupKeyCount = 1;
      lookupKeys.set(name, keys);
      keys.clear();
    }
    keys.set(value, key);
  }
  return key;
}
