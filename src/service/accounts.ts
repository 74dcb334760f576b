/**
 * Accounts (accounts.json): username, scrypt password hash, listing sources. Verification runs
 * scrypt off the event loop and compares with crypto.timingSafeEqual; an unknown username is
 * verified against a dummy hash with the same cost, so timing does not tell which names exist.
 * An account with `"admin": true` may also write (upsert and remove) inside its sources over HTTP.
 */
import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';

export interface Account {
  readonly username: string;
  /** `scrypt$N$r$p$saltBase64$hashBase64` */
  readonly password_hash: string;
  /** OriginatingSystemNames this account may see (case-sensitive). */
  readonly sources: readonly string[];
  /** May write (upsert, remove) records of its sources over HTTP; absent means false. */
  readonly admin?: boolean;
}

/** accounts.json: `{ "accounts": [...] }` (a bare array is accepted too). */
export type AccountsFile = { readonly accounts: readonly Account[] } | readonly Account[];

interface ScryptHash {
  readonly N: number;
  readonly r: number;
  readonly p: number;
  readonly salt: Buffer;
  readonly hash: Buffer;
}

interface StoredAccount {
  readonly username: string;
  readonly sources: readonly string[];
  readonly admin: boolean;
  readonly hash: ScryptHash;
}

function parseHash(text: string, username: string): ScryptHash {
  const parts = text.split('$');
  const [scheme, n, r, p, salt, hash] = parts;
  const N = Number(n);
  const R = Number(r);
  const P = Number(p);
  const ok =
    parts.length === 6 &&
    scheme === 'scrypt' &&
    Number.isInteger(N) &&
    N > 1 &&
    (N & (N - 1)) === 0 &&
    N <= 2 ** 22 &&
    Number.isInteger(R) &&
    R > 0 &&
    R <= 64 &&
    Number.isInteger(P) &&
    P > 0 &&
    P <= 16 &&
    /^[A-Za-z0-9+/]+={0,2}$/.test(salt) &&
    /^[A-Za-z0-9+/]+={0,2}$/.test(hash);
  if (!ok) throw new TypeError(`accounts: the password_hash of '${username}' is not of the form scrypt$N$r$p$salt$hash (base64 salt and hash)`);
  const out = { N, r: R, p: P, salt: Buffer.from(salt, 'base64'), hash: Buffer.from(hash, 'base64') };
  if (out.hash.length < 16) throw new TypeError(`accounts: the password hash of '${username}' is shorter than 16 bytes`);
  return out;
}

function derive(password: string, h: Pick<ScryptHash, 'N' | 'r' | 'p' | 'salt'>, length: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scrypt(password, h.salt, length, { N: h.N, r: h.r, p: h.p, maxmem: 128 * h.N * h.r * h.p + 32 * 1024 * 1024 }, (err, key) =>
      err ? reject(err) : resolve(key),
    );
  });
}

export class Accounts {
  private readonly byName: ReadonlyMap<string, StoredAccount>;
  private readonly dummy: ScryptHash;

  constructor(file: unknown) {
    const list = file === null || file === undefined ? [] : Array.isArray(file) ? file : (file as { accounts?: unknown }).accounts;
    if (!Array.isArray(list)) throw new TypeError('accounts: expected { "accounts": [ { username, password_hash, sources } ] }');
    const byName = new Map<string, StoredAccount>();
    for (const a of list as unknown[]) {
      const { username, password_hash, sources, admin } = (a ?? {}) as Record<string, unknown>;
      if (typeof username !== 'string' || username === '') throw new TypeError('accounts: every account needs a non-empty username');
      if (typeof password_hash !== 'string') throw new TypeError(`accounts: '${username}' has no password_hash`);
      if (!Array.isArray(sources) || !sources.every((s) => typeof s === 'string'))
        throw new TypeError(`accounts: the sources of '${username}' must be an array of strings`);
      if (admin !== undefined && typeof admin !== 'boolean') throw new TypeError(`accounts: the admin flag of '${username}' must be true or false`);
      if (byName.has(username)) throw new TypeError(`accounts: '${username}' appears twice`);
      byName.set(username, { username, sources: Object.freeze([...sources]), admin: admin === true, hash: parseHash(password_hash, username) });
    }
    this.byName = byName;
    const first = byName.values().next().value;
    this.dummy = {
      N: first?.hash.N ?? 16384,
      r: first?.hash.r ?? 8,
      p: first?.hash.p ?? 1,
      salt: randomBytes(16),
      hash: randomBytes(first?.hash.hash.length ?? 32),
    };
  }

  get size(): number {
    return this.byName.size;
  }

  /** The account's sources and admin flag when the password is right, else null (the same work either way). */
  async verify(username: string, password: string): Promise<{ username: string; sources: readonly string[]; admin: boolean } | null> {
    const account = this.byName.get(username);
    const h = account?.hash ?? this.dummy;
    const derived = await derive(password, h, h.hash.length);
    const same = timingSafeEqual(derived, h.hash);
    return account !== undefined && same ? { username: account.username, sources: account.sources, admin: account.admin } : null;
  }
}
