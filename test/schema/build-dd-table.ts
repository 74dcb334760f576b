/**
 * Regenerates src/schema/dd-2.0.ts from the RESO Data Dictionary 2.0 reference metadata of
 * @reso-standards/reso-common (a dev dependency, so the table is committed and the library does
 * not need the package at run time):
 *
 *   npx tsx test/schema/build-dd-table.ts
 *
 * test/schema/schema.test.ts checks the committed table against the reference, so a stale table
 * fails the suite.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { ddTableText } from './dd-reference.js';

const out = path.resolve(import.meta.dirname, '../../src/schema/dd-2.0.ts');
writeFileSync(out, ddTableText());
process.stdout.write(`wrote ${path.relative(process.cwd(), out)}\n`);
