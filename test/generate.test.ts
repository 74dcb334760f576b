import { spawnSync } from 'node:child_process';
import { createHash, scryptSync, timingSafeEqual } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DEFAULT_REFERENCE, DEMO_ACCOUNTS, generateDataset, generateListings } from '../src/generate/dataset.js';
import { MLS_TABLE, STREET_SUFFIXES } from '../src/generate/tables.js';
import type { JsonRecord } from '../src/generate/listing.js';

const root = path.resolve(import.meta.dirname, '..');
const tmpDirs: string[] = [];
const tmp = (): string => {
  const d = mkdtempSync(path.join(os.tmpdir(), 'reso-gen-'));
  tmpDirs.push(d);
  return d;
};
afterAll(() => tmpDirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

/** File name -> sha256 of its bytes (deep-equality of large Buffers is slow in expect). */
const readDir = (dir: string): Record<string, string> =>
  Object.fromEntries(
    readdirSync(dir)
      .filter((f) => !f.startsWith('.'))
      .sort()
      .map((f) => [
        f,
        createHash('sha256')
          .update(readFileSync(path.join(dir, f)))
          .digest('hex'),
      ]),
  );

// ---- RESO Data Dictionary 2.0, from @reso-standards/reso-common ----
interface DdField {
  resourceName: string;
  fieldName: string;
  type: string;
  isCollection?: boolean;
}
interface DdLookup {
  lookupName: string;
  lookupValue: string;
  annotations?: Array<{ term: string; value: string }>;
}
const require = createRequire(import.meta.url);
const dd = require('@reso-standards/reso-common/reference-metadata/dd-2.0.json') as { fields: DdField[]; lookups: DdLookup[] };
const ddFields = new Map(dd.fields.map((f) => [`${f.resourceName}.${f.fieldName}`, f]));
const standardNames = new Map<string, Set<string>>();
for (const l of dd.lookups) {
  const name = l.annotations?.find((a) => a.term === 'RESO.OData.Metadata.StandardName')?.value ?? l.lookupValue;
  if (!standardNames.has(l.lookupName)) standardNames.set(l.lookupName, new Set());
  standardNames.get(l.lookupName)!.add(name);
}

// ---- one sample data set shared by the distribution tests ----
const N = 4000;
const sample = [...generateListings({ listings: N, seed: 'distribution' })];
const properties = sample.map((l) => l.property);
const media = sample.flatMap((l) => l.media);
const openHouses = sample.flatMap((l) => l.openHouses);
const changes = sample.flatMap((l) => l.changes);
const byKey = new Map(properties.map((p) => [p.ListingKey as string, p]));
const share = (pred: (p: JsonRecord) => boolean): number => properties.filter(pred).length / N;

describe('determinism', () => {
  it('gives byte-identical files for the same seed, size and reference', () => {
    const a = tmp();
    const b = tmp();
    generateDataset({ listings: 300, seed: 7, outDir: a });
    generateDataset({ listings: 300, seed: 7, outDir: b });
    expect(readDir(a)).toEqual(readDir(b));
  });

  it('gives different data for another seed or another reference instant', () => {
    const a = [...generateListings({ listings: 20, seed: 7 })].map((l) => JSON.stringify(l));
    const b = [...generateListings({ listings: 20, seed: 8 })].map((l) => JSON.stringify(l));
    const c = [...generateListings({ listings: 20, seed: 7, reference: '2024-01-01T00:00:00Z' })].map((l) => JSON.stringify(l));
    expect(a).not.toEqual(b);
    expect(a).not.toEqual(c);
  });

  it('a prefix of a data set is the smaller data set (listing i depends only on seed and i)', () => {
    const small = [...generateListings({ listings: 50, seed: 'p' })].map((l) => JSON.stringify(l));
    const large = [...generateListings({ listings: 200, seed: 'p' })].slice(0, 50).map((l) => JSON.stringify(l));
    // Agent pools scale with size, so compare only the fields that do not come from them.
    const strip = (s: string): string =>
      JSON.stringify(Object.fromEntries(Object.entries(JSON.parse(s).property as JsonRecord).filter(([k]) => !/Agent|Office/.test(k))));
    expect(small.map(strip)).toEqual(large.map(strip));
  });

  it('does not depend on the time zone or locale of the machine (CLI in another zone)', () => {
    const a = tmp();
    const b = tmp();
    generateDataset({ listings: 200, seed: 'tz', outDir: a });
    const run = spawnSync(
      process.execPath,
      ['--import', 'tsx', path.join(root, 'src/adapters/cli.ts'), 'generate', '--listings', '200', '--seed', 'tz', '--out', b],
      {
        env: { ...process.env, TZ: 'Pacific/Chatham', LANG: 'de_DE.UTF-8', LC_ALL: 'de_DE.UTF-8' },
        encoding: 'utf8',
      },
    );
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    expect(readDir(a)).toEqual(readDir(b));
  });

  it('the committed fixtures/default data set regenerates to the same bytes', () => {
    const out = tmp();
    generateDataset({ listings: 2000, seed: 'default', outDir: out });
    expect(readDir(out)).toEqual(readDir(path.join(root, 'fixtures/default')));
  });
});

describe('RESO names and values', () => {
  const resources: Array<[string, JsonRecord[]]> = [
    ['Property', properties],
    ['Media', media],
    ['OpenHouse', openHouses],
  ];

  it.each(resources)('every %s field is a Data Dictionary 2.0 field of that resource', (resource, records) => {
    const names = new Set(records.flatMap((r) => Object.keys(r)));
    const unknown = [...names].filter((n) => !ddFields.has(`${resource}.${n}`));
    expect(unknown).toEqual([]);
  });

  it.each(resources)('every %s lookup value is a RESO standard name of its lookup', (resource, records) => {
    let checked = 0;
    const bad: string[] = [];
    for (const r of records) {
      for (const [field, value] of Object.entries(r)) {
        const def = ddFields.get(`${resource}.${field}`)!;
        const allowed = standardNames.get(def.type);
        if (!allowed || allowed.size === 0) continue; // open lookups (MlsStatus, City, StreetSuffix...)
        for (const v of Array.isArray(value) ? value : [value]) {
          checked++;
          if (!allowed.has(v as string)) bad.push(`${field}=${String(v)}`);
        }
      }
    }
    expect(bad).toEqual([]);
    expect(checked).toBeGreaterThan(records.length);
  });

  it('ChangeType values of PropertyChange are RESO ChangeType names', () => {
    const allowed = standardNames.get('org.reso.metadata.enums.ChangeType')!;
    expect(changes.map((c) => c.ChangeType).filter((t) => !allowed.has(t as string))).toEqual([]);
  });

  it('street suffixes are USPS names or abbreviations and directionals are RESO StreetDirection values', () => {
    const suffixes = new Set(STREET_SUFFIXES.flat());
    expect(properties.filter((p) => !suffixes.has(p.StreetSuffix as string))).toEqual([]);
  });
});

describe('value distributions', () => {
  it('has keys that are unique and ListingIds unique', () => {
    expect(byKey.size).toBe(N);
    expect(new Set(properties.map((p) => p.ListingId)).size).toBe(N);
    expect(new Set(media.map((m) => m.MediaKey)).size).toBe(media.length);
    expect(new Set(openHouses.map((o) => o.OpenHouseKey)).size).toBe(openHouses.length);
    expect(new Set(changes.map((c) => c.PropertyChangeKey)).size).toBe(changes.length);
  });

  it('spreads listings over at least 5 MLSs with a realistic status mix', () => {
    const systems = new Set(properties.map((p) => p.OriginatingSystemName));
    expect(systems.size).toBeGreaterThanOrEqual(5);
    const statuses = new Set(properties.map((p) => p.StandardStatus));
    expect(statuses.size).toBeGreaterThanOrEqual(8);
    expect(share((p) => p.StandardStatus === 'Active')).toBeGreaterThan(0.2);
    expect(share((p) => p.StandardStatus === 'Active')).toBeLessThan(0.4);
    expect(share((p) => p.StandardStatus === 'Closed')).toBeGreaterThan(0.3);
    expect(share((p) => p.StandardStatus === 'Closed')).toBeLessThan(0.46);
  });

  it('prices leases monthly and sales in the hundreds of thousands', () => {
    const leases = properties.filter((p) => p.PropertyType === 'Residential Lease');
    const sales = properties.filter((p) => p.PropertyType === 'Residential');
    expect(leases.length).toBeGreaterThan(N * 0.08);
    expect(Math.max(...leases.map((p) => p.ListPrice as number))).toBeLessThan(30000);
    const median = (xs: number[]): number => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    expect(median(sales.map((p) => p.ListPrice as number))).toBeGreaterThan(200000);
    expect(properties.every((p) => (p.OriginalListPrice as number) >= (p.ListPrice as number))).toBe(true);
  });

  it('has ClosePrice and CloseDate exactly on closed listings', () => {
    for (const p of properties) {
      const closed = p.StandardStatus === 'Closed';
      expect(p.ClosePrice !== undefined, p.ListingKey as string).toBe(closed);
      expect(p.CloseDate !== undefined, p.ListingKey as string).toBe(closed);
    }
  });

  it('places every listing with good coordinates inside its city', () => {
    const cities = new Map(MLS_TABLE.flatMap((m) => m.cities.map((c) => [`${c.name}|${c.state}`, c] as const)));
    let inside = 0;
    for (const p of properties) {
      const lat = p.Latitude as number | undefined;
      const lon = p.Longitude as number | undefined;
      // Skip the deliberate defects: missing, 0,0, and latitude/longitude swapped (every city here
      // has a positive latitude and a negative longitude).
      if (lat === undefined || lon === undefined || lat <= 0 || lon >= 0) continue;
      const c = cities.get(`${String(p.City)}|${String(p.StateOrProvince)}`)!;
      expect(c.postalCodes, p.ListingKey as string).toContain(p.PostalCode ?? c.postalCodes[0]);
      expect(Math.abs(lat - c.lat), p.ListingKey as string).toBeLessThanOrEqual(c.dLat);
      expect(Math.abs(lon - c.lon), p.ListingKey as string).toBeLessThanOrEqual(c.dLon);
      inside++;
    }
    expect(inside).toBeGreaterThan(N * 0.95);
  });

  it('includes the defects a real feed has, at a few percent', () => {
    const missing = share((p) => p.Latitude === undefined || p.Longitude === undefined);
    const zero = share((p) => p.Latitude === 0 && p.Longitude === 0);
    const swapped = share((p) => ((p.Latitude as number | undefined) ?? 0) < 0);
    const noFullName = share((p) => p.ListAgentFullName === undefined);
    const noYear = share((p) => p.PropertyType !== 'Land' && p.YearBuilt === undefined);
    const noEntry = share((p) => p.OriginalEntryTimestamp === undefined);
    for (const s of [missing, zero, swapped, noFullName, noYear, noEntry]) {
      expect(s).toBeGreaterThan(0);
      expect(s).toBeLessThan(0.08);
    }
  });

  it('keeps every timestamp before the reference instant, in a consistent order', () => {
    const ref = Date.parse(DEFAULT_REFERENCE);
    for (const p of properties) {
      const mod = Date.parse(p.ModificationTimestamp as string);
      expect(mod).toBeLessThanOrEqual(ref);
      if (p.OriginalEntryTimestamp) {
        const entry = Date.parse(p.OriginalEntryTimestamp as string);
        expect(entry).toBeLessThanOrEqual(mod);
        expect(Date.parse(`${p.ListingContractDate as string}T00:00:00Z`)).toBeLessThanOrEqual(entry);
      }
      if (p.CloseDate) expect(Date.parse(`${p.CloseDate as string}T00:00:00Z`)).toBeLessThan(ref);
    }
    for (const r of [...media, ...changes, ...openHouses]) expect(Date.parse(r.ModificationTimestamp as string)).toBeLessThanOrEqual(ref);
  });

  it('writes 40-150 word remarks with a long-tailed (Zipf-like) word distribution', () => {
    const counts = new Map<string, number>();
    for (const p of properties) {
      const words = (p.PublicRemarks as string).split(' ');
      expect(words.length).toBeGreaterThanOrEqual(40);
      expect(words.length).toBeLessThanOrEqual(150);
      for (const w of (p.PublicRemarks as string)
        .toLowerCase()
        .split(/[^a-z0-9]+/)
        .filter(Boolean))
        counts.set(w, (counts.get(w) ?? 0) + 1);
    }
    const freq = [...counts.values()].sort((a, b) => b - a);
    expect(freq.length).toBeGreaterThan(300);
    expect(freq[0]).toBeGreaterThan(10 * freq[99]);
    expect(counts.get('pool')).toBeGreaterThan(N * 0.05);
    expect(counts.get('granite')).toBeGreaterThan(N * 0.05);
  });
});

describe('child resources', () => {
  it('points every Media row at an existing listing, with 0-40 per listing and one preferred photo at most', () => {
    for (const l of sample) {
      expect(l.media.length).toBeLessThanOrEqual(40);
      expect(l.media.filter((m) => m.PreferredPhotoYN === true).length).toBeLessThanOrEqual(1);
      expect(l.media.map((m) => m.Order)).toEqual(l.media.map((_, i) => i + 1));
      expect(l.property.PhotosCount).toBe(l.media.filter((m) => m.MediaCategory === 'Photo').length);
    }
    for (const m of media) {
      expect(m.ResourceName).toBe('Property');
      expect(byKey.has(m.ResourceRecordKey as string)).toBe(true);
    }
    expect(sample.some((l) => l.media.length === 0)).toBe(true);
    expect(sample.some((l) => l.media.length >= 35)).toBe(true);
    expect(media.some((m) => m.PreferredPhotoYN === true && m.Order !== 1)).toBe(true);
  });

  it('gives open houses only to listings on the market, with local times and an offset', () => {
    expect(openHouses.length).toBeGreaterThan(N * 0.03);
    for (const o of openHouses) {
      const p = byKey.get(o.ListingKey as string)!;
      expect(['Active', 'Coming Soon']).toContain(p.StandardStatus);
      expect(o.OriginatingSystemName).toBe(p.OriginatingSystemName);
      expect(o.OpenHouseStartTime).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:00:00[+-]\d{2}:\d{2}$/);
      expect((o.OpenHouseStartTime as string).slice(0, 10)).toBe(o.OpenHouseDate);
      expect(Date.parse(o.OpenHouseEndTime as string)).toBeGreaterThan(Date.parse(o.OpenHouseStartTime as string));
    }
  });

  it('records price and status changes that agree with the listing', () => {
    for (const l of sample) {
      const price = l.changes.find((c) => c.FieldName === 'ListPrice');
      if (l.property.ListPrice !== l.property.OriginalListPrice) {
        expect(price?.PreviousValue).toBe(String(l.property.OriginalListPrice));
        expect(price?.NewValue).toBe(String(l.property.ListPrice));
      } else {
        expect(price).toBeUndefined();
      }
      const statuses = l.changes.filter((c) => c.FieldName === 'StandardStatus');
      expect(statuses[statuses.length - 1].NewValue).toBe(
        l.property.StandardStatus === 'Coming Soon' ? 'Coming Soon' : l.property.StandardStatus === 'Active' ? 'Active' : l.property.StandardStatus,
      );
    }
  });
});

describe('accounts and MLS profiles', () => {
  const dir = tmp();
  generateDataset({ listings: 10, seed: 'acct', outDir: dir });
  const accountsText = readFileSync(path.join(dir, 'accounts.json'), 'utf8');
  const accounts = JSON.parse(accountsText) as { accounts: Array<{ username: string; password_hash: string; sources: string[] }> };

  it('stores passwords only as scrypt hashes that verify', () => {
    expect(accounts.accounts.map((a) => a.username)).toEqual(['demo', 'partner']);
    for (const demo of DEMO_ACCOUNTS) {
      expect(accountsText).not.toContain(demo.password);
      const stored = accounts.accounts.find((a) => a.username === demo.username)!;
      const [scheme, n, r, p, salt, hash] = stored.password_hash.split('$');
      expect(scheme).toBe('scrypt');
      const derived = scryptSync(demo.password, Buffer.from(salt, 'base64'), 32, { N: Number(n), r: Number(r), p: Number(p) });
      expect(timingSafeEqual(derived, Buffer.from(hash, 'base64'))).toBe(true);
      const wrong = scryptSync('wrong', Buffer.from(salt, 'base64'), 32, { N: Number(n), r: Number(r), p: Number(p) });
      expect(timingSafeEqual(wrong, Buffer.from(hash, 'base64'))).toBe(false);
    }
    const [demo, partner] = accounts.accounts;
    expect(demo.sources).not.toEqual(partner.sources);
  });

  it('has a profile with every field for every MLS, the disclaimer keeping {{current_year}}', () => {
    const profiles = JSON.parse(readFileSync(path.join(dir, 'mls_profiles.json'), 'utf8')) as Record<string, Record<string, string>>;
    expect(Object.keys(profiles).sort()).toEqual(MLS_TABLE.map((m) => m.code).sort());
    for (const [code, p] of Object.entries(profiles)) {
      expect(p.originating_system_name).toBe(code);
      expect(p.originating_system_full_name.length).toBeGreaterThan(3);
      expect(p.disclaimer).toContain('{{current_year}}');
      expect(p.mls_logo).toMatch(/^https:\/\//);
      expect(p.required_update_frequency).toMatch(/^(1 (minute|hour|day|week)|\d+ (minutes|hours|days|weeks))$/);
    }
  });
});

describe('CLI', () => {
  const cli = (...args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', path.join(root, 'src/adapters/cli.ts'), ...args], { encoding: 'utf8' });

  it('rejects bad arguments with a clear message and exit code 2', () => {
    const bad = cli('generate', '--listings', 'many', '--out', tmp());
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain("--listings takes a non-negative integer, got 'many'");
    const noOut = cli('generate', '--listings', '5');
    expect(noOut.status).toBe(2);
    expect(noOut.stderr).toContain('--out DIR is required');
    const unknown = cli('generate', '--listings', '5', '--out', tmp(), '--colour', 'red');
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toContain("Unknown option '--colour'");
    const badRef = cli('generate', '--listings', '5', '--out', tmp(), '--reference', '2025-01-01');
    expect(badRef.status).toBe(1);
    expect(badRef.stderr).toContain('reference must be an ISO 8601 instant');
  });

  it('reports what it wrote', () => {
    const ok = cli('generate', '--listings', '25', '--seed', '3', '--out', tmp());
    expect(ok.status).toBe(0);
    expect(ok.stdout).toMatch(/^wrote 25 listings, \d+ media, \d+ open houses, \d+ property changes, \d+ members, \d+ offices to /);
  });
});
