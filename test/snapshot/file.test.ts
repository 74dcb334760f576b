import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import {
  readSnapshotFile,
  SNAPSHOT_FORMAT_VERSION,
  SnapshotError,
  writeSnapshotFile,
  type SnapshotArray,
  type SnapshotErrorCode,
} from '../../src/snapshot/file.js';

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));
afterEach(() => vi.restoreAllMocks());

function tempDir(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'reso-snapshot-'));
  dirs.push(d);
  return d;
}

/** The SnapshotError `f` throws (fails the test if it returns or throws anything else). */
function snapshotError(f: () => unknown): SnapshotError {
  let result: unknown;
  try {
    result = f();
  } catch (e) {
    if (e instanceof SnapshotError) return e;
    throw new Error(`expected a SnapshotError, got ${String(e)}`, { cause: e });
  }
  throw new Error(`expected a SnapshotError, got a result: ${JSON.stringify(result, (_, v: unknown) => (typeof v === 'bigint' ? String(v) : v))}`);
}

function expectRejected(file: string, codes: readonly SnapshotErrorCode[]): SnapshotError {
  const e = snapshotError(() => readSnapshotFile(file));
  expect(codes).toContain(e.code);
  expect(e.message).toContain(file);
  return e;
}

/** Deterministic pseudo-random bytes (xorshift32). */
function pseudoRandomBytes(n: number, seed: number): Uint8Array {
  const out = new Uint8Array(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    out[i] = x & 0xff;
  }
  return out;
}

function bytesOf(a: SnapshotArray): Buffer {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength);
}

function expectSameArrays(actual: ReadonlyMap<string, SnapshotArray>, expected: ReadonlyMap<string, SnapshotArray>): void {
  expect([...actual.keys()]).toEqual([...expected.keys()]);
  for (const [name, a] of expected) {
    const b = actual.get(name)!;
    const type = a instanceof Uint8Array ? Uint8Array : a.constructor;
    expect(b.constructor, name).toBe(type);
    expect(b.length, name).toBe(a.length);
    expect(bytesOf(b).equals(bytesOf(a)), name).toBe(true);
    // A fresh array that owns its memory.
    expect(b.byteOffset, name).toBe(0);
    expect(b.buffer.byteLength, name).toBe(b.byteLength);
  }
}

/** The files in `dir` other than `keep` (temporary files left behind, for instance). */
function others(dir: string, keep: string): string[] {
  return fs.readdirSync(dir).filter((f) => f !== path.basename(keep));
}

const everyType = (): Map<string, SnapshotArray> =>
  new Map<string, SnapshotArray>([
    ['u8', Uint8Array.from([0, 1, 127, 128, 255])],
    ['i8', Int8Array.from([-128, -1, 0, 1, 127])],
    ['u16', Uint16Array.from([0, 1, 0xffff, 0x8000, 0x1234])],
    ['i16', Int16Array.from([-32768, -1, 0, 32767])],
    ['u32', Uint32Array.from([0, 1, 0xffff_ffff, 0x8000_0000])],
    ['i32', Int32Array.from([-(2 ** 31), -1, 0, 2 ** 31 - 1])],
    ['f32', Float32Array.from([NaN, -0, 0, Infinity, -Infinity, 1.5, 3.4e38, 1e-45])],
    ['f64', Float64Array.from([NaN, -0, 0, Infinity, -Infinity, Number.MAX_VALUE, Number.MIN_VALUE, Math.PI])],
    ['i64', BigInt64Array.from([-(2n ** 63n), -1n, 0n, 1n, 2n ** 63n - 1n])],
    ['u64', BigUint64Array.from([0n, 1n, 2n ** 64n - 1n, 2n ** 63n])],
    ...[Uint8Array, Int8Array, Uint16Array, Int16Array, Uint32Array, Int32Array, Float32Array, Float64Array, BigInt64Array, BigUint64Array].map(
      (c): [string, SnapshotArray] => [`empty ${c.name}`, new c(0)],
    ),
    ['Straße 名前 🏠', Float64Array.from([1, 2, 3])],
    ['', Uint16Array.from([7])],
  ]);

const meta = { version: 3, name: 'Ünïcødé 名前 🏠 "quoted" \\ \n', nested: { list: [1, null, true, 'x'], empty: {} } };

/** A file with the given JSON header and data section, with correct checksums. */
function forge(file: string, json: string | Buffer, data: Uint8Array = new Uint8Array(0), version = SNAPSHOT_FORMAT_VERSION): void {
  const j = typeof json === 'string' ? Buffer.from(json, 'utf8') : json;
  const dataStart = Math.ceil((20 + j.length) / 8) * 8;
  const bytes = Buffer.alloc(dataStart + data.length + 4);
  bytes.write('RESOSNAP', 0, 'latin1');
  bytes.writeUInt32LE(version, 8);
  bytes.writeUInt32LE(j.length, 12);
  j.copy(bytes, 20);
  bytes.writeUInt32LE(zlib.crc32(j, zlib.crc32(bytes.subarray(0, 16))), 16);
  bytes.set(data, dataStart);
  bytes.writeUInt32LE(zlib.crc32(bytes.subarray(0, bytes.length - 4)), bytes.length - 4);
  fs.writeFileSync(file, bytes);
}

describe('round trip', () => {
  it('keeps every element type, special values, unicode names and meta, in order', () => {
    const file = path.join(tempDir(), 'a.snap');
    const arrays = everyType();
    const { bytes } = writeSnapshotFile(file, { meta, arrays });
    expect(bytes).toBe(fs.statSync(file).size);
    const back = readSnapshotFile(file);
    expect(back.meta).toEqual(meta);
    expectSameArrays(back.arrays, arrays);
    const f64 = back.arrays.get('f64') as Float64Array;
    expect(Number.isNaN(f64[0]) && Object.is(f64[1], -0) && f64[3] === Infinity).toBe(true);
    const f32 = back.arrays.get('f32') as Float32Array;
    expect(Number.isNaN(f32[0]) && Object.is(f32[1], -0) && f32[4] === -Infinity).toBe(true);
    expect((back.arrays.get('i64') as BigInt64Array)[0]).toBe(-(2n ** 63n));
    expect((back.arrays.get('u64') as BigUint64Array)[2]).toBe(2n ** 64n - 1n);
  });

  it('places every array at an 8-byte-aligned offset described by the JSON header', () => {
    const file = path.join(tempDir(), 'a.snap');
    writeSnapshotFile(file, { meta, arrays: everyType() });
    const raw = fs.readFileSync(file);
    expect(raw.subarray(0, 8).toString('latin1')).toBe('RESOSNAP');
    expect(raw.readUInt32LE(8)).toBe(SNAPSHOT_FORMAT_VERSION);
    const j = raw.readUInt32LE(12);
    const header = JSON.parse(raw.subarray(20, 20 + j).toString('utf8')) as { arrays: Array<{ name: string; type: string; length: number; offset: number }> };
    const dataStart = Math.ceil((20 + j) / 8) * 8;
    const arrays = everyType();
    for (const entry of header.arrays) {
      expect(entry.offset % 8).toBe(0);
      const a = arrays.get(entry.name)!;
      expect(raw.subarray(dataStart + entry.offset, dataStart + entry.offset + a.byteLength).equals(bytesOf(a))).toBe(true);
    }
    expect(raw.readUInt32LE(raw.length - 4)).toBe(zlib.crc32(raw.subarray(0, raw.length - 4)));
  });

  it('writes views at odd offsets and Buffers as their own bytes, read back as fresh arrays', () => {
    const file = path.join(tempDir(), 'a.snap');
    const base = new Float64Array(10).map((_, i) => i * 1.25);
    const arrays = new Map<string, SnapshotArray>([
      ['bytes', pseudoRandomBytes(100, 7).subarray(3, 61)],
      ['doubles', base.subarray(3, 7)],
      ['buffer', Buffer.from('héllo', 'utf8')],
    ]);
    writeSnapshotFile(file, { meta: null, arrays });
    const back = readSnapshotFile(file);
    expect(back.meta).toBeNull();
    expectSameArrays(back.arrays, arrays);
  });

  it('takes meta as JSON would, and no arrays at all', () => {
    const dir = tempDir();
    for (const [i, m] of [undefined, null, 'text', 0, [], { a: undefined, b: NaN, c: new Date(0) }].entries()) {
      const file = path.join(dir, `${i}.snap`);
      writeSnapshotFile(file, { meta: m, arrays: new Map() });
      const back = readSnapshotFile(file);
      expect(back.meta).toEqual(m === undefined ? undefined : JSON.parse(JSON.stringify(m)));
      expect(back.arrays.size).toBe(0);
    }
  });

  it('replaces an existing snapshot and leaves no temporary file', () => {
    const dir = tempDir();
    const file = path.join(dir, 'a.snap');
    writeSnapshotFile(file, { meta: 1, arrays: everyType() });
    const arrays = new Map<string, SnapshotArray>([['x', Int32Array.from([1, 2, 3])]]);
    writeSnapshotFile(file, { meta: 2, arrays });
    const back = readSnapshotFile(file);
    expect(back.meta).toBe(2);
    expectSameArrays(back.arrays, arrays);
    expect(others(dir, file)).toEqual([]);
  });

  it('round-trips a 200 MB array (written and read in 64 MiB chunks)', () => {
    const file = path.join(tempDir(), 'big.snap');
    const big = new Float64Array(25_000_001);
    for (let i = 0; i < big.length; i++) big[i] = i * 0.5 - 1e6;
    const arrays = new Map<string, SnapshotArray>([
      ['small', Uint8Array.from([1, 2, 3])],
      ['big', big],
      ['after', Int16Array.from([-5])],
    ]);
    writeSnapshotFile(file, { meta: { rows: big.length }, arrays });
    const back = readSnapshotFile(file);
    expectSameArrays(back.arrays, arrays);
  });
});

describe('rejection', () => {
  /** A small snapshot with data in several arrays, and its bytes. */
  function sample(dir: string): { file: string; raw: Buffer } {
    const file = path.join(dir, 'sample.snap');
    writeSnapshotFile(file, {
      meta: { name: 'sample', list: [1, 2, 3] },
      arrays: new Map<string, SnapshotArray>([
        ['a', Uint8Array.from(pseudoRandomBytes(13, 1))],
        ['b', new Float64Array(pseudoRandomBytes(800, 2).buffer)],
        ['c', new Uint32Array(pseudoRandomBytes(400, 3).buffer)],
      ]),
    });
    return { file, raw: fs.readFileSync(file) };
  }

  it('a truncated file, cut anywhere (header, JSON, padding, data, checksum), is SnapshotTruncated', () => {
    const dir = tempDir();
    const { raw } = sample(dir);
    const cut = path.join(dir, 'cut.snap');
    const j = raw.readUInt32LE(12);
    const offsets = new Set<number>();
    for (let n = 1; n < Math.min(raw.length, 20 + j + 16); n++) offsets.add(n);
    for (let n = 20 + j; n < raw.length; n += 37) offsets.add(n);
    for (let n = raw.length - 12; n < raw.length; n++) offsets.add(n);
    fs.writeFileSync(cut, raw);
    for (const n of [...offsets].sort((a, b) => b - a)) {
      fs.truncateSync(cut, n);
      const e = expectRejected(cut, ['SnapshotTruncated', 'SnapshotCorrupt']);
      expect(e.code, `cut at ${n}`).toBe('SnapshotTruncated');
    }
  });

  it('a flipped bit anywhere is rejected', () => {
    const dir = tempDir();
    const { raw } = sample(dir);
    const bad = path.join(dir, 'bad.snap');
    fs.writeFileSync(bad, raw);
    const fd = fs.openSync(bad, 'r+');
    const seen = new Set<string>();
    for (let i = 0; i < raw.length; i++) {
      fs.writeSync(fd, Uint8Array.of(raw[i] ^ (1 << (i % 8))), 0, 1, i);
      const e = snapshotError(() => readSnapshotFile(bad));
      expect(e.message).toContain(bad);
      seen.add(e.code);
      fs.writeSync(fd, raw, i, 1, i);
    }
    fs.closeSync(fd);
    expect(readSnapshotFile(bad).meta).toEqual({ name: 'sample', list: [1, 2, 3] });
    expect([...seen].sort()).toEqual(['SnapshotCorrupt', 'SnapshotForeign', 'SnapshotTruncated', 'SnapshotVersion']);
  });

  it('trailing bytes after the checksum are SnapshotCorrupt', () => {
    const dir = tempDir();
    const { file } = sample(dir);
    fs.appendFileSync(file, Buffer.from([0]));
    expect(expectRejected(file, ['SnapshotCorrupt']).reason).toMatch(/describes only/);
  });

  it('another format version is SnapshotVersion, naming both versions', () => {
    const dir = tempDir();
    const { file, raw } = sample(dir);
    const copy = Buffer.from(raw);
    copy.writeUInt32LE(SNAPSHOT_FORMAT_VERSION + 1, 8);
    fs.writeFileSync(file, copy);
    const e = expectRejected(file, ['SnapshotVersion']);
    expect(e.message).toContain(`version ${SNAPSHOT_FORMAT_VERSION + 1}`);
    expect(e.message).toContain(`version ${SNAPSHOT_FORMAT_VERSION}`);
    // Even with the rest of the layout changed beyond recognition.
    fs.writeFileSync(file, Buffer.concat([copy.subarray(0, 12), Buffer.from([1, 2, 3])]));
    expectRejected(file, ['SnapshotVersion']);
  });

  it('files that are not snapshots are SnapshotForeign', () => {
    const dir = tempDir();
    const cases: Array<[string, Uint8Array | string]> = [
      ['listings.json', JSON.stringify([{ ListingKey: 'A1', ListPrice: 100000 }])],
      ['empty.snap', ''],
      ['random.snap', pseudoRandomBytes(4096, 42)],
      ['short.snap', 'abc'],
      ['near.snap', 'RESOSNAQ\u0001\u0000\u0000\u0000'],
    ];
    for (const [name, content] of cases) {
      const file = path.join(dir, name);
      fs.writeFileSync(file, content);
      expectRejected(file, ['SnapshotForeign']);
    }
    expectRejected(dir, ['SnapshotForeign']);
  });

  it('a missing file is SnapshotNotFound', () => {
    const dir = tempDir();
    expectRejected(path.join(dir, 'nothing.snap'), ['SnapshotNotFound']);
    expectRejected(path.join(dir, 'no-dir', 'nothing.snap'), ['SnapshotNotFound']);
  });

  it('a header claiming a 1 TB array is rejected before anything is allocated', () => {
    const file = path.join(tempDir(), 'huge.snap');
    const alloc = vi.spyOn(Buffer, 'alloc');
    forge(file, JSON.stringify({ arrays: [{ name: 'x', type: 'Float64Array', length: 2 ** 37, offset: 0 }], meta: null }), new Uint8Array(64));
    alloc.mockClear();
    const e = expectRejected(file, ['SnapshotTruncated']);
    expect(e.reason).toMatch(/the file is 180 bytes, its table describes 1099511627\d{3}$/);
    // Only the fixed header and the JSON header were allocated.
    expect(alloc.mock.calls.every(([n]) => n <= 200)).toBe(true);
    // Absurd lengths that no file could hold are an inconsistent header.
    forge(file, JSON.stringify({ arrays: [{ name: 'x', type: 'Float64Array', length: Number.MAX_SAFE_INTEGER, offset: 0 }] }));
    expectRejected(file, ['SnapshotCorrupt']);
  });

  it('an inconsistent table is SnapshotCorrupt even with correct checksums', () => {
    const file = path.join(tempDir(), 'forged.snap');
    const entry = (name: string, type: string, length: unknown, offset: unknown): unknown => ({ name, type, length, offset });
    const headers: unknown[] = [
      [],
      null,
      { arrays: {} },
      { arrays: [entry('x', 'Uint8ClampedArray', 8, 0)] },
      { arrays: [entry('x', 'Float16Array', 4, 0)] },
      { arrays: [entry('x', 'Uint8Array', -1, 0)] },
      { arrays: [entry('x', 'Uint8Array', 1.5, 0)] },
      { arrays: [entry('x', 'Uint8Array', '8', 0)] },
      { arrays: [entry('x', 'Uint8Array', 8, 8)] }, // a gap
      { arrays: [entry('x', 'Uint8Array', 8, 0), entry('y', 'Uint8Array', 8, 4)] }, // overlap, misaligned
      { arrays: [entry('x', 'Uint8Array', 9, 0), entry('y', 'Uint8Array', 7, 9)] }, // misaligned
      { arrays: [entry('x', 'Uint8Array', 8, 0), entry('x', 'Uint8Array', 8, 8)] }, // duplicate name
      { arrays: [{ name: 'x', type: 'Uint8Array', length: 16, offset: 0, extra: 1 }] },
      { arrays: [{ name: 'x', type: 'Uint8Array', length: 16 }] },
      { arrays: [entry('x', 'Uint8Array', 16, 0)], other: 1 },
    ];
    for (const h of headers) {
      forge(file, JSON.stringify(h), new Uint8Array(16));
      expectRejected(file, ['SnapshotCorrupt']);
    }
    // Not JSON, or not UTF-8, behind a matching header checksum.
    forge(file, '{"arrays":[', new Uint8Array(16));
    expectRejected(file, ['SnapshotCorrupt']);
    forge(file, Buffer.concat([Buffer.from('{"arrays":[],"meta":"'), Buffer.from([0xff]), Buffer.from('"}')]));
    expectRejected(file, ['SnapshotCorrupt']);
    // The same table, consistent, is accepted: the forger is right.
    forge(file, JSON.stringify({ arrays: [entry('x', 'Uint8Array', 9, 0), entry('y', 'Uint8Array', 7, 16)] }), new Uint8Array(23).fill(5));
    expect([...readSnapshotFile(file).arrays.values()].map((a) => a.length)).toEqual([9, 7]);
  });

  it('a big-endian host is refused, for writing and reading', () => {
    const dir = tempDir();
    const { file } = sample(dir);
    vi.spyOn(os, 'endianness').mockReturnValue('BE');
    expect(snapshotError(() => writeSnapshotFile(path.join(dir, 'be.snap'), { meta: null, arrays: new Map() })).code).toBe('SnapshotUnsupportedHost');
    expect(expectRejected(file, ['SnapshotUnsupportedHost']).reason).toMatch(/big-endian/);
    expect(others(dir, file)).toEqual([]);
  });
});

describe('a failed write', () => {
  function existing(): { dir: string; file: string; before: Buffer } {
    const dir = tempDir();
    const file = path.join(dir, 'a.snap');
    writeSnapshotFile(file, { meta: 'old', arrays: everyType() });
    return { dir, file, before: fs.readFileSync(file) };
  }

  function expectUnchanged(dir: string, file: string, before: Buffer): void {
    expect(fs.readFileSync(file).equals(before)).toBe(true);
    expect(readSnapshotFile(file).meta).toBe('old');
    expect(others(dir, file)).toEqual([]);
  }

  it('meta that JSON cannot hold (a BigInt)', () => {
    const { dir, file, before } = existing();
    const e = snapshotError(() => writeSnapshotFile(file, { meta: { n: 1n }, arrays: new Map() }));
    expect(e.code).toBe('SnapshotWriteFailed');
    expect(e.message).toContain(file);
    expect(e.reason).toMatch(/BigInt/);
    expectUnchanged(dir, file, before);
  });

  it('an array whose buffer was transferred', () => {
    const { dir, file, before } = existing();
    const gone = new Float64Array(1000);
    structuredClone(gone.buffer, { transfer: [gone.buffer] });
    const arrays = new Map<string, SnapshotArray>([
      ['ok', new Float64Array(1000)],
      ['gone', gone],
    ]);
    expect(snapshotError(() => writeSnapshotFile(file, { meta: 'new', arrays })).code).toBe('SnapshotWriteFailed');
    expectUnchanged(dir, file, before);
  });

  it('an array of a type snapshots do not hold, or a name that is not a string', () => {
    const { dir, file, before } = existing();
    const arrays = new Map([['c', new Uint8ClampedArray(4) as unknown as SnapshotArray]]);
    expect(snapshotError(() => writeSnapshotFile(file, { meta: 'new', arrays })).reason).toMatch(/Uint8ClampedArray/);
    const numbered = new Map([[1, new Uint8Array(4)]]) as unknown as Map<string, SnapshotArray>;
    expect(snapshotError(() => writeSnapshotFile(file, { meta: 'new', arrays: numbered })).reason).toMatch(/not a string/);
    expectUnchanged(dir, file, before);
  });

  it('the disk failing mid-way (after the header and an array were written)', () => {
    const { dir, file, before } = existing();
    const real = fs.writeSync.bind(fs) as (...args: unknown[]) => number;
    let calls = 0;
    let tmpSeen = false;
    vi.spyOn(fs, 'writeSync').mockImplementation((...args: unknown[]) => {
      if (++calls === 3) {
        tmpSeen = others(dir, file).length === 1;
        throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
      }
      return real(...args);
    });
    const e = snapshotError(() => writeSnapshotFile(file, { meta: 'new', arrays: everyType() }));
    expect(e.code).toBe('SnapshotWriteFailed');
    expect(e.reason).toMatch(/ENOSPC/);
    expect(tmpSeen).toBe(true);
    vi.restoreAllMocks();
    expectUnchanged(dir, file, before);
  });

  it('a directory that does not exist', () => {
    const dir = tempDir();
    const file = path.join(dir, 'missing', 'a.snap');
    expect(snapshotError(() => writeSnapshotFile(file, { meta: null, arrays: new Map() })).code).toBe('SnapshotWriteFailed');
    expect(fs.readdirSync(dir)).toEqual([]);
  });
});
