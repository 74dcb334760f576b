/**
 * Regenerates src/schema/dd-2.0.ts (fields) and src/schema/dd-lookups.ts (standard lookup values) from the RESO Data Dictionary 2.0 reference metadata of
 * @reso-standards/reso-common (a dev dependency, so the table is committed and the library does
 * not need the package at run time):
 *
 *   npx tsx test/schema/build-dd-table.ts
 *
 * test/schema/schema.test.ts checks the committed tables against the reference, so a stale table
 * fails the suite.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { ddLookupTableText, ddTableText } from './dd-reference.js';

for (const [file, text] of [
  ['dd-2.0.ts', ddTableText()],
  ['dd-lookups.ts', ddLookupTableText()],
] as const) {
  const out = path.resolve(import.meta.dirname, '../../src/schema', file);
  writeFileSync(out, text);
  process.stdout.write(`wrote ${path.relative(process.cwd(), out)}\n`);
}
