/**
 * Edm.Date and Edm.DateTimeOffset values. Dates are stored as days since 1970-01-01 and
 * timestamps as epoch milliseconds, both in Float64Array columns; a timestamp also keeps its
 * *style* (seconds present or not, fraction digits, Z or the offset it was written with) so that
 * the record comes back exactly as it went in. Parsing reads bytes and allocates nothing.
 *
 * Accepted forms (OData ABNF dateValue / dateTimeOffsetValue, four-digit years):
 *   date       YYYY-MM-DD
 *   timestamp  YYYY-MM-DDTHH:MM[:SS[.fraction]](Z|+HH:MM|-HH:MM)
 */

const DAY_MS = 86_400_000;

/** Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil). */
export function daysFromCivil(y: number, m: number, d: number): number {
  y -= m <= 2 ? 1 : 0;
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const doy = Math.floor((153 * (m > 2 ? m - 3 : m + 9) + 2) / 5) + d - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146097 + doe - 719468;
}

function daysInMonth(y: number, m: number): number {
  if (m === 2) return (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0 ? 29 : 28;
  return m === 4 || m === 6 || m === 9 || m === 11 ? 30 : 31;
}

function digit(b: Uint8Array, i: number): number {
  const c = b[i] - 48;
  return c >= 0 && c <= 9 ? c : -1000;
}

function two(b: Uint8Array, i: number): number {
  return digit(b, i) * 10 + digit(b, i + 1);
}

/** Days since epoch of the date in b[s, e), or NaN when it is not a valid YYYY-MM-DD date. */
export function parseDate(b: Uint8Array, s: number, e: number): number {
  if (e - s !== 10 || b[s + 4] !== 45 || b[s + 7] !== 45) return NaN;
  return civilDays(b, s);
}

function civilDays(b: Uint8Array, s: number): number {
  const y = two(b, s) * 100 + two(b, s + 2);
  const m = two(b, s + 5);
  const d = two(b, s + 8);
  if (y < 0 || m < 1 || m > 12 || d < 1 || d > daysInMonth(y, m)) return NaN;
  return daysFromCivil(y, m, d);
}

/**
 * A timestamp's style packed in an integer: bit 0 seconds written; bits 1-2 fraction digits
 * (0-3); bits 3-4 zone (0 `Z`, 1 `+HH:MM`, 2 `-HH:MM`); bits 5+ offset minutes.
 */
export const CANONICAL_STYLE = 1 | (3 << 1);

/** Output of parseTimestamp (reused; never allocated per value). */
export class TimestampParts {
  ms = 0;
  style = CANONICAL_STYLE;
  /** False when the fraction has more than 3 digits: ms is truncated and the text must be kept. */
  exact = true;
}

/** Parses b[s, e) into `out`; false when it is not an ISO 8601 timestamp with Z or an offset. */
export function parseTimestamp(b: Uint8Array, s: number, e: number, out: TimestampParts): boolean {
  if (e - s < 17 || b[s + 4] !== 45 || b[s + 7] !== 45 || b[s + 10] !== 84 || b[s + 13] !== 58) return false;
  const days = civilDays(b, s);
  const hh = two(b, s + 11);
  const mi = two(b, s + 14);
  if (days !== days || hh < 0 || hh > 23 || mi < 0 || mi > 59) return false;
  let i = s + 16;
  let sec = 0;
  let style = 0;
  let frac = 0;
  let fracDigits = 0;
  out.exact = true;
  if (b[i] === 58 && i + 3 <= e) {
    sec = two(b, i + 1);
    if (sec < 0 || sec > 59) return false;
    style = 1;
    i += 3;
    if (b[i] === 46) {
      i++;
      while (i < e && b[i] >= 48 && b[i] <= 57) {
        if (fracDigits < 3) frac = frac * 10 + (b[i] - 48);
        fracDigits++;
        i++;
      }
      if (fracDigits === 0) return false;
      if (fracDigits > 3) out.exact = false;
      else style |= fracDigits << 1;
      for (let k = Math.min(fracDigits, 3); k < 3; k++) frac *= 10;
    }
  }
  let offsetMs = 0;
  if (i === e - 1 && b[i] === 90) {
    // Z: zone bits stay 0.
  } else if (i === e - 6 && (b[i] === 43 || b[i] === 45) && b[i + 3] === 58) {
    const oh = two(b, i + 1);
    const om = two(b, i + 4);
    if (oh < 0 || oh > 23 || om < 0 || om > 59) return false;
    const minutes = oh * 60 + om;
    const negative = b[i] === 45;
    style |= (negative ? 2 : 1) << 3;
    style |= minutes << 5;
    offsetMs = (negative ? -minutes : minutes) * 60_000;
  } else {
    return false;
  }
  out.ms = days * DAY_MS + hh * 3_600_000 + mi * 60_000 + sec * 1000 + frac - offsetMs;
  out.style = style;
  return true;
}

function pad2(n: number): string {
  return n < 10 ? `0${n}` : String(n);
}

function pad3(n: number): string {
  return n < 10 ? `00${n}` : n < 100 ? `0${n}` : String(n);
}

function pad4(n: number): string {
  return n < 10 ? `000${n}` : n < 100 ? `00${n}` : n < 1000 ? `0${n}` : String(n);
}

/** YYYY-MM-DD of a day number (the inverse of parseDate). */
export function formatDate(days: number): string {
  const c = cachedCivil(days);
  if (c > 0) {
    const y = (c / 10000) | 0;
    const md = c - y * 10000;
    return String.fromCharCode(
      48 + ((y / 1000) | 0),
      48 + (((y / 100) | 0) % 10),
      48 + (((y / 10) | 0) % 10),
      48 + (y % 10),
      45,
      48 + ((md / 1000) | 0),
      48 + (((md / 100) | 0) % 10),
      45,
      48 + (((md / 10) | 0) % 10),
      48 + (md % 10),
    );
  }
  const { y, m, d } = civilOf(days);
  return `${pad4(y)}-${pad2(m)}-${pad2(d)}`;
}

/** The proleptic Gregorian date of a day number (Howard Hinnant's civil_from_days). */
function civilOf(days: number): { y: number; m: number; d: number } {
  const z = days + 719468;
  const era = Math.floor(z / 146097);
  const doe = z - era * 146097;
  const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36524) - Math.floor(doe / 146096)) / 365);
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const d = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const m = mp < 10 ? mp + 3 : mp - 9;
  return { y: yoe + era * 400 + (m <= 2 ? 1 : 0), m, d };
}

/**
 * Records write every date and timestamp through here, and listings' dates crowd into a few
 * decades: the civil date of each whole day from 1900-01-01 to 2079-06-06 is computed once and
 * kept as y * 10000 + m * 100 + d (0 while not yet asked; 256 KB in all).
 */
const CIVIL_FROM = -25567;
const civilCache = new Int32Array(1 << 16);

/** y * 10000 + m * 100 + d of a whole day number in the cached span, else 0. */
function cachedCivil(days: number): number {
  const i = days - CIVIL_FROM;
  if (!(i >= 0 && i < civilCache.length) || (i | 0) !== i) return 0;
  let c = civilCache[i];
  if (c === 0) {
    const { y, m, d } = civilOf(days);
    civilCache[i] = c = y * 10000 + m * 100 + d;
  }
  return c;
}

/**
 * The timestamp text of `ms` written in `style` (the inverse of parseTimestamp for exact values).
 * The canonical form of a whole millisecond in the cached span of days is written as 24 character
 * codes into one flat string: 4x faster than joining padded parts, and a flat string is cheaper
 * for JSON.stringify to write than the rope that concatenation leaves.
 */
export function formatTimestamp(ms: number, style: number): string {
  if (style === CANONICAL_STYLE) {
    const days = Math.floor(ms / DAY_MS);
    const c = cachedCivil(days);
    const inDay = ms - days * DAY_MS;
    if (c > 0 && (inDay | 0) === inDay) {
      const y = (c / 10000) | 0;
      const md = c - y * 10000;
      const s = (inDay / 1000) | 0;
      const f = inDay - s * 1000;
      const hh = (s / 3600) | 0;
      const mi = ((s / 60) | 0) % 60;
      const ss = s % 60;
      return String.fromCharCode(
        48 + ((y / 1000) | 0),
        48 + (((y / 100) | 0) % 10),
        48 + (((y / 10) | 0) % 10),
        48 + (y % 10),
        45,
        48 + ((md / 1000) | 0),
        48 + (((md / 100) | 0) % 10),
        45,
        48 + (((md / 10) | 0) % 10),
        48 + (md % 10),
        84,
        48 + ((hh / 10) | 0),
        48 + (hh % 10),
        58,
        48 + ((mi / 10) | 0),
        48 + (mi % 10),
        58,
        48 + ((ss / 10) | 0),
        48 + (ss % 10),
        46,
        48 + ((f / 100) | 0),
        48 + (((f / 10) | 0) % 10),
        48 + (f % 10),
        90,
      );
    }
  }
  return formatTimestampParts(ms, style);
}

/** formatTimestamp for any style and instant, from padded parts. */
function formatTimestampParts(ms: number, style: number): string {
  const zone = (style >> 3) & 3;
  const minutes = style >> 5;
  const local = ms + (zone === 2 ? -minutes : minutes) * 60_000;
  const days = Math.floor(local / DAY_MS);
  const inDay = local - days * DAY_MS;
  const hh = Math.floor(inDay / 3_600_000);
  const mi = Math.floor(inDay / 60_000) % 60;
  let text = `${formatDate(days)}T${pad2(hh)}:${pad2(mi)}`;
  if (style & 1) {
    text += `:${pad2(Math.floor(inDay / 1000) % 60)}`;
    const digits = (style >> 1) & 3;
    if (digits > 0) text += `.${pad3(inDay % 1000).slice(0, digits)}`;
  }
  return text + (zone === 0 ? 'Z' : `${zone === 2 ? '-' : '+'}${pad2(Math.floor(minutes / 60))}:${pad2(minutes % 60)}`);
}

const parts = new TimestampParts();
const scratch = new Uint8Array(64);

function ascii(text: string): number {
  if (text.length > scratch.length) return -1;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c > 127) return -1;
    scratch[i] = c;
  }
  return text.length;
}

/** Epoch ms of an ISO 8601 timestamp string with Z or an offset, or NaN. */
export function parseTimestampString(text: string): number {
  const n = ascii(text);
  return n >= 0 && parseTimestamp(scratch, 0, n, parts) ? parts.ms : NaN;
}

/** Days since epoch of a YYYY-MM-DD string, or NaN. */
export function parseDateString(text: string): number {
  const n = ascii(text);
  return n >= 0 ? parseDate(scratch, 0, n) : NaN;
}

export { DAY_MS };
