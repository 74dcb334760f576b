/**
 * The test harness's parts on their own: instants and durations, the clock, fault rules (their
 * checks, matching and seeded draws) and the limits profile's checks.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseDuration, parseInstant, TestClock } from '../../src/harness/clock.js';
import { checkFaultRules, Faults, resourceOfPath } from '../../src/harness/faults.js';
import { Budgets, checkLimits, checkQuery } from '../../src/harness/limits.js';
import { Journal } from '../../src/harness/journal.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

const codeOf = (fn: () => unknown): string | undefined => {
  try {
    fn();
  } catch (error) {
    return (error as { code?: string }).code;
  }
  return undefined;
};

describe('instants and durations', () => {
  it('reads ISO 8601 instants with a zone and epoch milliseconds', () => {
    expect(parseInstant('2025-06-01T00:00:00Z')).toBe(Date.UTC(2025, 5, 1));
    expect(parseInstant('2025-06-01T02:00:00.5+02:00')).toBe(Date.UTC(2025, 5, 1) + 500);
    expect(parseInstant(0)).toBe(0);
    expect(parseInstant(new Date(5))).toBe(5);
  });

  it.each(['2025-06-01', '2025-06-01T00:00:00', 'tomorrow', '2025-13-01T00:00:00Z', '', NaN, 9e15, null, {}])('refuses %s with InvalidInstant', (v) => {
    expect(codeOf(() => parseInstant(v))).toBe('InvalidInstant');
  });

  it('reads milliseconds and ISO 8601 durations of weeks, days, hours, minutes and seconds', () => {
    expect(parseDuration(1500)).toBe(1500);
    expect(parseDuration('PT90S')).toBe(90_000);
    expect(parseDuration('PT0.5S')).toBe(500);
    expect(parseDuration('P1DT2H')).toBe(26 * 3_600_000);
    expect(parseDuration('P2W')).toBe(14 * 86_400_000);
    expect(parseDuration('PT1H30M')).toBe(5_400_000);
    expect(parseDuration('-PT1H')).toBe(-3_600_000);
  });

  it.each(['P1Y', 'P2M', 'P', 'PT', 'P1DT', '1h', 'PT1.5.5S', 'PTS', Infinity, '', [], undefined])('refuses %s with InvalidDuration', (v) => {
    expect(codeOf(() => parseDuration(v))).toBe('InvalidDuration');
  });
});

describe('TestClock', () => {
  it('stands still when frozen, and moves only by set and advance', () => {
    const clock = new TestClock('2025-06-01T00:00:00Z');
    expect(clock.frozen).toBe(true);
    expect(clock.now()).toBe(Date.UTC(2025, 5, 1));
    clock.advance('PT1H');
    expect(clock.state()).toEqual({ now: '2025-06-01T01:00:00.000Z', epochMs: Date.UTC(2025, 5, 1, 1), frozen: true });
    clock.set('2030-01-01T00:00:00Z');
    expect(clock.now()).toBe(Date.UTC(2030, 0, 1));
    clock.advance(-1000);
    expect(clock.now()).toBe(Date.UTC(2030, 0, 1) - 1000);
  });

  it('runs with the system clock plus an offset when not frozen', () => {
    const clock = new TestClock('2000-01-01T00:00:00Z', false);
    const a = clock.now();
    expect(Math.abs(a - Date.UTC(2000, 0, 1))).toBeLessThan(60_000);
    clock.advance('P1D');
    expect(clock.now() - a).toBeGreaterThanOrEqual(86_400_000);
  });

  it('refuses a move out of a date’s range, and keeps its time', () => {
    const clock = new TestClock(8.6e15);
    expect(codeOf(() => clock.advance('P100000W'))).toBe('InvalidDuration');
    expect(clock.now()).toBe(8.6e15);
  });
});

describe('fault rules', () => {
  it('names every problem of a bad set, with where it is', () => {
    let details: Array<{ target?: string }> = [];
    try {
      checkFaultRules([
        { path: '/v1/listing/data/*', fault: { kind: 'status', status: 200 } },
        { fault: { kind: 'latency', ms: [5, 1] }, probability: 2, nth: 0, colour: 'red' },
        { method: 'get', fault: { kind: 'explode' } },
        'not a rule',
      ]);
    } catch (error) {
      expect((error as { code: string }).code).toBe('InvalidFaultRule');
      details = (error as { details: Array<{ target?: string }> }).details;
    }
    expect(details.map((d) => d.target)).toEqual([
      'rules[0].path',
      'rules[0].fault.status',
      'rules[1].colour',
      'rules[1].nth',
      'rules[1].probability',
      'rules[1].fault.ms',
      'rules[2].method',
      'rules[2].fault.kind',
      'rules[3]',
    ]);
    expect(codeOf(() => checkFaultRules({ nope: 1 }))).toBe('InvalidFaultRule');
    expect(checkFaultRules({ rules: [{ path: '/v1/listings/data/Property**', fault: { kind: 'drop' } }] })).toHaveLength(1);
  });

  it('matches by method, path pattern, resource and options present', () => {
    const faults = new Faults([
      { name: 'expand', options: ['$expand'], fault: { kind: 'drop' } },
      { name: 'media', resource: 'Media', method: 'GET', fault: { kind: 'drop' } },
      { name: 'one', path: '/v1/listings/data/*', fault: { kind: 'drop' } },
    ]);
    const rule = (path: string, options: string[] = [], method = 'GET'): string | null => faults.decide({ method, path, options })?.rule ?? null;
    expect(rule('/v1/listings/data/Property', ['$EXPAND'])).toBe('expand');
    expect(rule("/v1/listings/data/Media('K')")).toBe('media');
    expect(rule('/v1/listings/data/Property')).toBe('one');
    expect(rule("/v1/listings/data/Property('K')/Media")).toBe(null);
    expect(rule('/v1/token', [], 'POST')).toBe(null);
    expect(resourceOfPath("/v1/listings/data/Property('K')/Media")).toBe('Property');
    expect(resourceOfPath('/v1/listings/data/$metadata')).toBe(null);
  });

  it('fires on the Nth match, at most `times`, and the first rule that fires applies while every matching rule counts', () => {
    const faults = new Faults([
      { name: 'third', nth: 3, fault: { kind: 'status', status: 503 } },
      { name: 'twice', times: 2, fault: { kind: 'status', status: 500 } },
    ]);
    const seen = Array.from({ length: 5 }, () => faults.decide({ method: 'GET', path: '/v1/listings/data/Property', options: [] })?.rule ?? null);
    expect(seen).toEqual(['twice', 'twice', 'third', null, null]);
    expect(faults.list().map((r) => [r.matched, r.fired])).toEqual([
      [5, 1],
      [5, 2],
    ]);
  });

  it('gives the same faults for the same seed and requests, and other faults for another seed', () => {
    const rules = [
      { probability: 0.5, fault: { kind: 'status', status: 429 } },
      { probability: 0.5, fault: { kind: 'latency', ms: [10, 500] } },
    ];
    const run = (seed: string): string[] => {
      const faults = new Faults(rules, seed);
      return Array.from({ length: 200 }, () => {
        const d = faults.decide({ method: 'GET', path: '/v1/listings/data/Property', options: [] });
        return d === null ? '-' : `${d.action.kind}${d.delayMs}`;
      });
    };
    const a = run('seed-a');
    expect(run('seed-a')).toEqual(a);
    expect(run('seed-b')).not.toEqual(a);
    // about half fire on the first rule; the second sees every request too, and fires on about half of the rest
    const statuses = a.filter((x) => x === 'status0').length;
    expect(statuses).toBeGreaterThan(70);
    expect(statuses).toBeLessThan(130);
    expect(a.filter((x) => x.startsWith('latency')).every((x) => Number(x.slice(7)) >= 10 && Number(x.slice(7)) <= 500)).toBe(true);
  });

  it('set starts the counts and streams again; add appends; a bad set changes nothing', () => {
    const faults = new Faults([{ nth: 2, fault: { kind: 'drop' } }]);
    const decide = (): string | null => faults.decide({ method: 'GET', path: '/v1/token', options: [] })?.rule ?? null;
    expect([decide(), decide()]).toEqual([null, 'rule 0']);
    expect(codeOf(() => faults.set([{ fault: {} }]))).toBe('InvalidFaultRule');
    expect(faults.list()[0].matched).toBe(2);
    faults.set([{ nth: 2, fault: { kind: 'drop' } }]);
    expect([decide(), decide()]).toEqual([null, 'rule 0']);
    faults.add({ name: 'all', fault: { kind: 'drop' } });
    expect(decide()).toBe('all');
    faults.clear();
    expect(decide()).toBe(null);
  });
});

describe('limits profiles', () => {
  it('checks a profile', () => {
    expect(checkLimits({ requestsPerSecond: 5, requireOriginatingSystemName: true })).toEqual({ requestsPerSecond: 5, requireOriginatingSystemName: true });
    expect(codeOf(() => checkLimits({ requestsPerSecond: 0 }))).toBe('InvalidLimits');
    expect(codeOf(() => checkLimits({ maxTop: 1.5 }))).toBe('InvalidLimits');
    expect(codeOf(() => checkLimits({ perMinute: 5 }))).toBe('InvalidLimits');
    expect(codeOf(() => checkLimits([]))).toBe('InvalidLimits');
  });

  it('spends budgets per account over fixed windows of the clock', () => {
    const clock = new TestClock('2025-06-01T00:00:00.250Z');
    const budgets = new Budgets({ requestsPerSecond: 2, requestsPerHour: 3 }, clock.now);
    budgets.admit('a');
    budgets.admit('a');
    expect(budgets.headers('a')).toEqual({ 'X-RateLimit-Limit': '2', 'X-RateLimit-Remaining': '0', 'X-RateLimit-Reset': '1' });
    let retry: string | undefined;
    try {
      budgets.admit('a');
    } catch (error) {
      expect((error as { code: string }).code).toBe('RateLimited');
      retry = (error as { headers: Record<string, string> }).headers['Retry-After'];
    }
    expect(retry).toBe('1');
    budgets.admit('b');
    clock.advance(750);
    budgets.admit('a');
    // the hour's third request is spent: the next is refused until the hour ends
    clock.advance('PT1S');
    expect(codeOf(() => budgets.admit('a'))).toBe('RateLimited');
    clock.set('2025-06-01T01:00:00Z');
    budgets.admit('a');
  });

  it('refuses an account whose responses passed the bytes per hour', () => {
    const clock = new TestClock('2025-06-01T00:00:00Z');
    const budgets = new Budgets({ bytesPerHour: 100 }, clock.now);
    budgets.admit('a');
    budgets.charge('a', 150);
    expect(codeOf(() => budgets.admit('a'))).toBe('RateLimited');
    budgets.admit('b');
    clock.advance('PT1H');
    budgets.admit('a');
  });

  it('checks $top, an expansion’s $top and the OriginatingSystemName filter', () => {
    const profile = { maxTop: 100, maxExpandTop: 5, requireOriginatingSystemName: true };
    expect(codeOf(() => checkQuery(profile, 'Property', "$filter=OriginatingSystemName eq 'X'&$top=101", true))).toBe('TopTooLarge');
    expect(codeOf(() => checkQuery(profile, 'Property', "$filter=OriginatingSystemName eq 'X'&$expand=Media($top=6)", true))).toBe('TopTooLarge');
    expect(codeOf(() => checkQuery(profile, 'Property', "$filter=City eq 'X'", true))).toBe('OriginatingSystemNameRequired');
    expect(codeOf(() => checkQuery(profile, 'Member', '', true))).toBe(undefined);
    expect(
      codeOf(() => checkQuery(profile, 'Property', "$filter=City eq 'X' and OriginatingSystemName in ('A','B')&$top=100&$expand=Media($top=5)", true)),
    ).toBe(undefined);
    // a query that does not parse is the engine's to refuse
    expect(codeOf(() => checkQuery(profile, 'Property', '$filter=(', true))).toBe(undefined);
  });
});

describe('the journal', () => {
  it('keeps the last N entries, oldest first', () => {
    const journal = new Journal(2);
    for (let i = 0; i < 3; i++) {
      journal.record({ seq: journal.next(), at: '', method: 'GET', url: `/${i}`, status: 200, durationMs: 1, fault: null, account: null });
    }
    expect(journal.list().map((e) => [e.seq, e.url])).toEqual([
      [2, '/1'],
      [3, '/2'],
    ]);
    journal.clear();
    expect(journal.list()).toEqual([]);
    expect(() => new Journal(0)).toThrow(TypeError);
  });
});

describe('the README', () => {
  it('shows the vitest example exactly as test/harness/readme-example.test.ts runs it', () => {
    const readme = readFileSync(path.join(root, 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('## Test harness'));
    const block = /```ts\n([\s\S]*?)```/.exec(section)?.[1];
    const example = readFileSync(path.join(root, 'test/harness/readme-example.test.ts'), 'utf8').replace("from '../../src/index.js'", "from 'reso-engine'");
    expect(block).toBe(example);
  });
});
