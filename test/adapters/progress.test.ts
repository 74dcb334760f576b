/**
 * Progress on a terminal: the line (rows, bytes, rate, percent, time left), at most five a second,
 * nothing when the stream is not a terminal; and the hooks that feed it (Engine.open of a data
 * directory or a snapshot, engine.save).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { duration, Progress, type ProgressStream } from '../../src/adapters/progress.js';
import { Engine, type OpenProgress } from '../../src/index.js';

function stream(isTTY: boolean): ProgressStream & { text: string } {
  const s = {
    isTTY,
    text: '',
    write(t: string): boolean {
      s.text += t;
      return true;
    },
  };
  return s;
}

describe('Progress', () => {
  it('writes one rewritten line on a terminal, with rate, percent and time left, at most every 200 ms', () => {
    let t = 0;
    const out = stream(true);
    const p = new Progress('loading', out, () => t);
    t = 2000;
    expect(p.line({ what: 'Property.jsonl', bytes: 4 * 1024 * 1024, bytesTotal: 10 * 1024 * 1024, rows: 1234 })).toBe(
      'loading Property.jsonl: 1,234 rows, 4.0 of 10.0 MB, 2.0 MB/s, 40%, ETA 3 s',
    );
    expect(p.line({ rows: 500, rowsTotal: 1000 })).toBe('loading: 500 of 1,000 rows, 250 rows/s, 50%, ETA 2 s');
    p.update({ rows: 1 });
    t = 2100;
    p.update({ rows: 2 });
    t = 2300;
    p.update({ rows: 3 });
    expect(out.text.split('\r\x1b[K').filter(Boolean)).toEqual(['loading: 1 rows, 1 rows/s', 'loading: 3 rows, 1 rows/s']);
    p.note('step done');
    p.end();
    expect(out.text.endsWith('step done\n')).toBe(true);
  });

  it('writes nothing when the stream is not a terminal', () => {
    const out = stream(false);
    const p = new Progress('loading', out);
    p.update({ rows: 1 });
    p.note('x');
    p.end();
    expect(out.text).toBe('');
  });

  it('says durations as a person would', () => {
    expect([duration(0.4), duration(59), duration(65), duration(3 * 3600 + 120)]).toEqual(['0 s', '59 s', '1 min 5 s', '3 h 2 min']);
  });
});

describe('progress hooks', () => {
  it('Engine.open reports a data directory’s files and a snapshot’s bytes; save reports the bytes written', async () => {
    const seen: OpenProgress[] = [];
    const engine = await Engine.open({ onProgress: (p) => seen.push(p) });
    const loads = seen.filter((p) => p.kind === 'load');
    expect(new Set(loads.map((p) => p.resource))).toContain('Property');
    const property = loads.filter((p) => p.resource === 'Property');
    expect(property[property.length - 1]).toMatchObject({ file: 'Property.jsonl', records: engine.store.Property.rowCount });
    const dir = mkdtempSync(path.join(os.tmpdir(), 'reso-progress-'));
    try {
      const file = path.join(dir, 'e.snapshot');
      const written: Array<[number, number]> = [];
      const { bytes } = engine.save(file, { onProgress: (b, total) => written.push([b, total]) });
      expect(written.length).toBeGreaterThan(1);
      expect(written.every(([b, total], i) => total === bytes && b <= total && (i === 0 || b > written[i - 1][0]))).toBe(true);
      const read: OpenProgress[] = [];
      await Engine.open({ snapshot: file, onProgress: (p) => read.push(p) });
      expect(read.length).toBeGreaterThan(1);
      expect(read[read.length - 1]).toEqual({ kind: 'snapshot', bytesRead: expect.any(Number), bytesTotal: bytes });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
