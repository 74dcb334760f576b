/**
 * The test harness's clock: one instant that the engine (DaysOnMarket, now(), current_year,
 * nextLink pins, the timestamps of changes and their EntityEvents) and the service (token expiry,
 * login throttling, rate limits) all read, moved only by `set` and `advance` while it is frozen
 * (the default for `startTestServer`), or running with the system clock plus an offset.
 *
 * Instants are ISO 8601 with a zone (`2025-06-01T00:00:00Z`, `...+02:00`) or epoch milliseconds;
 * durations are milliseconds or ISO 8601 `PnDTnHnMnS` (weeks too). Years and months have no fixed
 * length, so a duration naming them is refused rather than guessed. A regular expression reads
 * them: a library for this one grammar would be a dependency for ten lines.
 */
import { ServiceError } from '../service/errors.js';

const INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:\d{2})$/;
const DURATION = /^(-)?P(?:(\d+(?:\.\d+)?)W)?(?:(\d+(?:\.\d+)?)D)?(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?)?$/;
/** Beyond ±8.64e15 ms a JavaScript Date is invalid. */
const MAX_MS = 8.64e15;

/** An instant as epoch ms: an ISO 8601 instant with a zone, epoch milliseconds, or a Date. A bad one is a 400 `InvalidInstant`. */
export function parseInstant(value: unknown): number {
  const bad = (): never => {
    throw new ServiceError(
      'InvalidInstant',
      `${describe(value)} is not an instant: give an ISO 8601 time with a zone, such as 2025-06-01T00:00:00Z, or epoch milliseconds.`,
    );
  };
  let ms: number;
  if (value instanceof Date) ms = value.getTime();
  else if (typeof value === 'number') ms = value;
  else if (typeof value === 'string' && INSTANT.test(value)) ms = Date.parse(value);
  else return bad();
  if (!Number.isFinite(ms) || Math.abs(ms) > MAX_MS) return bad();
  return ms;
}

/** A duration as ms: milliseconds, or ISO 8601 (`PT90S`, `P1DT2H`, `PT0.5S`, `P2W`, `-PT1H`). A bad one is a 400 `InvalidDuration`. */
export function parseDuration(value: unknown): number {
  const bad = (why: string): never => {
    throw new ServiceError('InvalidDuration', `${describe(value)} is not a duration: ${why}`);
  };
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || Math.abs(value) > MAX_MS) return bad('a number of milliseconds must be finite and within ±8.64e15.');
    return value;
  }
  if (typeof value !== 'string') return bad('give milliseconds or ISO 8601 such as PT30S, PT2H or P1DT12H.');
  if (/^-?P(?:\d+(?:\.\d+)?[YM])/.test(value)) return bad('years and months have no fixed length; give weeks, days, hours, minutes or seconds.');
  const m = DURATION.exec(value);
  if (m === null || value === 'P' || value.endsWith('T') || /^-?PT?$/.test(value)) return bad('give milliseconds or ISO 8601 such as PT30S, PT2H or P1DT12H.');
  const [, sign, w, d, h, min, s] = m;
  const n = (x: string | undefined): number => (x === undefined ? 0 : Number(x));
  const ms = Math.round(((((n(w) * 7 + n(d)) * 24 + n(h)) * 60 + n(min)) * 60 + n(s)) * 1000);
  if (ms > MAX_MS) return bad('it is longer than a JavaScript date can move.');
  return sign === '-' ? -ms : ms;
}

function describe(value: unknown): string {
  const text = typeof value === 'string' ? `'${value.slice(0, 60)}'` : (JSON.stringify(value) ?? String(value));
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

export interface ClockState {
  /** The instant now, ISO 8601 in UTC. */
  readonly now: string;
  /** Epoch ms. */
  readonly epochMs: number;
  /** Whether it stands still between `set` and `advance` calls. */
  readonly frozen: boolean;
}

export class TestClock {
  /** Frozen: the instant. Running: null, and now() is the system clock plus `offset`. */
  private at: number | null;
  private offset = 0;

  /** Starts at `start` (default: the system clock's now); frozen unless `frozen` is false. */
  constructor(start?: unknown, frozen = true) {
    const first = start === undefined ? Date.now() : parseInstant(start);
    if (frozen) this.at = first;
    else {
      this.at = null;
      this.offset = first - Date.now();
    }
  }

  /** Epoch ms (a function the engine and the service are given as their clock). */
  readonly now = (): number => (this.at !== null ? this.at : Date.now() + this.offset);

  get frozen(): boolean {
    return this.at !== null;
  }

  /** Moves the clock to `instant` (ISO 8601 with a zone, epoch ms or a Date); returns the new instant, epoch ms. */
  set(instant: unknown): number {
    const ms = parseInstant(instant);
    if (this.at !== null) this.at = ms;
    else this.offset = ms - Date.now();
    return ms;
  }

  /** Moves the clock by `by` (ms or an ISO 8601 duration; negative moves it back); returns the new instant, epoch ms. */
  advance(by: unknown): number {
    const ms = parseDuration(by);
    const next = this.now() + ms;
    if (Math.abs(next) > MAX_MS) throw new ServiceError('InvalidDuration', `Advancing by ${ms} ms would move the clock past the range of a JavaScript date.`);
    return this.set(next);
  }

  state(): ClockState {
    const ms = this.now();
    return { now: new Date(ms).toISOString(), epochMs: ms, frozen: this.frozen };
  }
}
