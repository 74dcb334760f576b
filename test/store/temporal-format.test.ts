import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CANONICAL_STYLE, daysFromCivil, formatDate, formatTimestamp } from '../../src/store/temporal.js';

// The formatters as they were before the fast path (padded parts for every value): the reference.
const pad = (n: number, w: number): string => {
  const s = String(n);
  return s.length >= w ? s : '0'.repeat(w - s.length) + s;
};
function referenceDate(days: number): string {
  let z = days + 719468;
  const era = Math.floor(z / 146097);
  const doe = z - era * 146097;
  const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36524) - Math.floor(doe / 146096)) / 365);
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const d = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const m = mp < 10 ? mp + 3 : mp - 9;
  z = yoe + era * 400 + (m <= 2 ? 1 : 0);
  return `${z < 10 ? `000${z}` : z < 100 ? `00${z}` : z < 1000 ? `0${z}` : String(z)}-${pad(m, 2)}-${pad(d, 2)}`;
}
function referenceTimestamp(ms: number, style: number): string {
  const zone = (style >> 3) & 3;
  const minutes = style >> 5;
  const local = ms + (zone === 2 ? -minutes : minutes) * 60_000;
  const days = Math.floor(local / 86_400_000);
  const inDay = local - days * 86_400_000;
  let text = `${referenceDate(days)}T${pad(Math.floor(inDay / 3_600_000), 2)}:${pad(Math.floor(inDay / 60_000) % 60, 2)}`;
  if (style & 1) {
    text += `:${pad(Math.floor(inDay / 1000) % 60, 2)}`;
    const digits = (style >> 1) & 3;
    const f = inDay % 1000;
    if (digits > 0) text += `.${f < 10 ? `00${f}` : f < 100 ? `0${f}` : String(f)}`.slice(0, digits + 1);
  }
  return text + (zone === 0 ? 'Z' : `${zone === 2 ? '-' : '+'}${pad(Math.floor(minutes / 60), 2)}:${pad(minutes % 60, 2)}`);
}

const DAY = 86_400_000;
// the edges of the span of days whose civil dates are cached, and of four-digit years
const EDGE_DAYS = [
  daysFromCivil(1899, 12, 31),
  daysFromCivil(1900, 1, 1),
  daysFromCivil(1900, 1, 2),
  daysFromCivil(2079, 6, 5),
  daysFromCivil(2079, 6, 6),
  daysFromCivil(2079, 6, 7),
  daysFromCivil(2079, 6, 8),
  daysFromCivil(1970, 1, 1),
  daysFromCivil(1969, 12, 31),
  daysFromCivil(2000, 2, 29),
  daysFromCivil(2024, 2, 29),
  daysFromCivil(2100, 3, 1),
  daysFromCivil(1, 1, 1),
  daysFromCivil(999, 12, 31),
  daysFromCivil(9999, 12, 31),
  daysFromCivil(10000, 1, 1),
  daysFromCivil(0, 1, 1),
  daysFromCivil(-1, 12, 31),
];
const STYLES = [
  CANONICAL_STYLE,
  0,
  1,
  1 | (1 << 1),
  1 | (2 << 1),
  CANONICAL_STYLE | (1 << 3) | (330 << 5),
  CANONICAL_STYLE | (2 << 3) | (480 << 5),
  1 | (1 << 3) | (840 << 5),
];

describe('date and timestamp formatting', () => {
  it('writes the same text as the padded-parts formatter at the edges (cache span, years below 1000 and above 9999, negative, ms)', () => {
    for (const days of EDGE_DAYS) {
      expect(formatDate(days)).toBe(referenceDate(days));
      for (const inDay of [0, 1, 999, 1000, 59_999, 3_599_999, 43_200_123, DAY - 1000, DAY - 1]) {
        const ms = days * DAY + inDay;
        for (const style of STYLES) expect([ms, style, formatTimestamp(ms, style)]).toEqual([ms, style, referenceTimestamp(ms, style)]);
      }
    }
  });

  it('writes ISO 8601 as Date does for every four-digit year, to the millisecond', () => {
    for (const iso of [
      '0001-01-01T00:00:00.000Z',
      '0999-12-31T23:59:59.999Z',
      '1899-12-31T23:59:59.999Z',
      '1900-01-01T00:00:00.000Z',
      '2079-06-06T23:59:59.999Z',
      '2079-06-07T00:00:00.000Z',
      '9999-12-31T23:59:59.999Z',
    ]) {
      expect(formatTimestamp(Date.parse(iso), CANONICAL_STYLE)).toBe(iso);
    }
    fc.assert(
      fc.property(fc.integer({ min: Date.parse('0000-01-01T00:00:00.000Z'), max: Date.parse('9999-12-31T23:59:59.999Z') }), (ms) => {
        const iso = new Date(ms).toISOString();
        expect(formatTimestamp(ms, CANONICAL_STYLE)).toBe(iso);
      }),
      { seed: 18, numRuns: 5000 },
    );
  });

  it('matches the padded-parts formatter for any day, style, and fractional or out-of-range instant', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: -1_000_000, max: 3_000_000 }),
        fc.integer({ min: 0, max: DAY - 1 }),
        fc.constantFrom(...STYLES),
        fc.constantFrom(0, 0.5, 0.25),
        (days, inDay, style, fraction) => {
          const ms = days * DAY + inDay + fraction;
          expect(formatTimestamp(ms, style)).toBe(referenceTimestamp(ms, style));
          expect(formatDate(days)).toBe(referenceDate(days));
        },
      ),
      { seed: 18, numRuns: 5000 },
    );
    // the cache is filled on first use: ask again
    for (const days of [-25567, 0, 20000, 39996]) expect(formatDate(days)).toBe(referenceDate(days));
  });
});
