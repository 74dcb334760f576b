/**
 * Writes a whole data directory (SERVICE.md §6): Property, Media, OpenHouse, PropertyChange,
 * Member and Office as JSON Lines, plus accounts.json and mls_profiles.json. Listings are generated and written one at a
 * time, so memory stays flat at any size.
 */
import { scryptSync } from 'node:crypto';
import { closeSync, mkdirSync, openSync, renameSync, writeFileSync, writeSync } from 'node:fs';
import path from 'node:path';
import { GeneratorContext, type GeneratedListing, type GeneratedRoster, type JsonRecord } from './listing.js';
import { Rng } from './prng.js';
import { MLS_TABLE } from './tables.js';

/** The default reference instant: every generated timestamp lies before it. */
export const DEFAULT_REFERENCE = '2025-06-01T00:00:00.000Z';

export interface GenerateOptions {
  readonly listings: number;
  readonly seed: string | number;
  /** ISO 8601 instant all timestamps are relative to; defaults to DEFAULT_REFERENCE. */
  readonly reference?: string;
}

export interface GenerateDatasetOptions extends GenerateOptions {
  readonly outDir: string;
  /** Called every 1% (and at the end) with the number of listings written so far. */
  readonly onProgress?: (done: number, total: number) => void;
}

export interface GenerateSummary {
  readonly listings: number;
  readonly media: number;
  readonly openHouses: number;
  readonly propertyChanges: number;
  readonly members: number;
  readonly offices: number;
  readonly files: readonly string[];
}

/** Demo accounts written to accounts.json; their passwords are documented in the README. */
export const DEMO_ACCOUNTS: ReadonlyArray<{ username: string; password: string; sources: readonly string[] }> = [
  { username: 'demo', password: 'demo-password', sources: ['CRMLS', 'NWMLS', 'ARMLS', 'HAR'] },
  { username: 'partner', password: 'partner-password', sources: ['HAR', 'MRED', 'NorthstarMLS', 'Stellar', 'BrightMLS'] },
];

function validate(options: GenerateOptions): { seed: string; reference: number } {
  if (!Number.isInteger(options.listings) || options.listings < 0) {
    throw new RangeError(`listings must be a non-negative integer, got ${String(options.listings)}`);
  }
  const reference = Date.parse(options.reference ?? DEFAULT_REFERENCE);
  if (!Number.isFinite(reference) || !/(Z|[+-]\d{2}:\d{2})$/.test(options.reference ?? DEFAULT_REFERENCE)) {
    throw new RangeError(`reference must be an ISO 8601 instant with Z or an offset, got '${options.reference}'`);
  }
  return { seed: String(options.seed), reference };
}

/** The listings of a data set, one at a time, in ListingKey order. */
export function* generateListings(options: GenerateOptions): Generator<GeneratedListing> {
  const { seed, reference } = validate(options);
  const ctx = new GeneratorContext(seed, reference, options.listings);
  for (let i = 0; i < options.listings; i++) yield ctx.listing(i);
}

/** The Member and Office records of a data set (every agent and office its listings can name). */
export function generateRoster(options: GenerateOptions): GeneratedRoster {
  const { seed, reference } = validate(options);
  return new GeneratorContext(seed, reference, options.listings).roster();
}

/** Buffered, synchronous line writer: deterministic bytes and no stream back-pressure to manage. */
class LineFile {
  private readonly fd: number;
  private chunks: string[] = [];
  private size = 0;
  count = 0;

  constructor(readonly file: string) {
    this.fd = openSync(file, 'w');
  }

  write(record: JsonRecord): void {
    const line = JSON.stringify(record) + '\n';
    this.chunks.push(line);
    this.size += line.length;
    this.count++;
    if (this.size >= 1 << 20) this.flush();
  }

  flush(): void {
    if (this.chunks.length) writeSync(this.fd, this.chunks.join(''));
    this.chunks = [];
    this.size = 0;
  }

  close(): void {
    this.flush();
    closeSync(this.fd);
  }
}

export function generateDataset(options: GenerateDatasetOptions): GenerateSummary {
  const { seed, reference } = validate(options);
  mkdirSync(options.outDir, { recursive: true });
  // Write into temporary names and rename at the end, so an interrupted run leaves no half data set
  // under the real names.
  const tmp = (name: string): string => path.join(options.outDir, `.${name}.partial`);
  const names = ['Property.jsonl', 'Media.jsonl', 'OpenHouse.jsonl', 'PropertyChange.jsonl', 'Member.jsonl', 'Office.jsonl'] as const;
  const [property, media, openHouse, change, member, office] = names.map((n) => new LineFile(tmp(n)));
  const ctx = new GeneratorContext(seed, reference, options.listings);
  const step = Math.max(1, Math.floor(options.listings / 100));
  try {
    for (let i = 0; i < options.listings; i++) {
      const l = ctx.listing(i);
      property.write(l.property);
      for (const m of l.media) media.write(m);
      for (const o of l.openHouses) openHouse.write(o);
      for (const c of l.changes) change.write(c);
      if (options.onProgress && (i + 1) % step === 0) options.onProgress(i + 1, options.listings);
    }
    const roster = ctx.roster();
    for (const m of roster.members) member.write(m);
    for (const o of roster.offices) office.write(o);
  } finally {
    for (const f of [property, media, openHouse, change, member, office]) f.close();
  }
  for (const n of names) renameSync(tmp(n), path.join(options.outDir, n));
  writeFileSync(path.join(options.outDir, 'accounts.json'), JSON.stringify(accountsFile(seed), null, 2) + '\n');
  writeFileSync(path.join(options.outDir, 'mls_profiles.json'), JSON.stringify(profilesFile(), null, 2) + '\n');
  options.onProgress?.(options.listings, options.listings);
  return {
    listings: property.count,
    media: media.count,
    openHouses: openHouse.count,
    propertyChanges: change.count,
    members: member.count,
    offices: office.count,
    files: [...names, 'accounts.json', 'mls_profiles.json'],
  };
}

/**
 * Password hashes in the form `scrypt$N$r$p$salt$hash` (salt and hash base64). The salt comes from
 * the seed so the file is reproducible; a production accounts.json would use random salts.
 */
export function hashPassword(password: string, salt: Buffer, N = 16384, r = 8, p = 1): string {
  const hash = scryptSync(password, salt, 32, { N, r, p });
  return `scrypt$${N}$${r}$${p}$${salt.toString('base64')}$${hash.toString('base64')}`;
}

export function accountsFile(seed: string): { accounts: Array<{ username: string; password_hash: string; sources: string[] }> } {
  return {
    accounts: DEMO_ACCOUNTS.map((a) => {
      const rng = new Rng(`${seed}:salt:${a.username}`);
      const salt = Buffer.alloc(16);
      for (let i = 0; i < 16; i += 4) salt.writeUInt32BE(rng.nextUint32(), i);
      return { username: a.username, password_hash: hashPassword(a.password, salt), sources: [...a.sources] };
    }),
  };
}

export function profilesFile(): Record<
  string,
  { originating_system_name: string; originating_system_full_name: string; disclaimer: string; mls_logo: string; required_update_frequency: string }
> {
  const out: ReturnType<typeof profilesFile> = {};
  for (const mls of MLS_TABLE) {
    out[mls.code] = {
      originating_system_name: mls.code,
      originating_system_full_name: mls.fullName,
      disclaimer:
        `Based on information submitted to the ${mls.fullName} as of {{current_year}}. All data is obtained from ` +
        'various sources and may not have been verified by broker or MLS. All information should be independently reviewed and verified for accuracy.',
      mls_logo: `https://media.example.com/logos/${mls.code.toLowerCase()}.png`,
      required_update_frequency: mls.requiredUpdateFrequency,
    };
  }
  return out;
}
