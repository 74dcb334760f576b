import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll } from 'vitest';

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

export function tempDir(): string {
  const d = mkdtempSync(path.join(os.tmpdir(), 'reso-store-'));
  dirs.push(d);
  return d;
}

/** Writes files (name -> text) into a new temporary directory. */
export function dataDir(files: Record<string, string>): string {
  const d = tempDir();
  for (const [name, text] of Object.entries(files)) writeFileSync(path.join(d, name), text);
  return d;
}

export const jsonl = (records: readonly unknown[]): string => records.map((r) => JSON.stringify(r)).join('\n') + '\n';

/** A minimal valid listing. */
export const listing = (key: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  ListingKey: key,
  StandardStatus: 'Active',
  ListPrice: 100000,
  ModificationTimestamp: '2024-05-01T10:00:00.000Z',
  ...extra,
});
