/**
 * MLS profiles (mls_profiles.json) and the two account endpoints built from them (SERVICE.md §5):
 * `GET /v1/account/resources` and `GET /v1/listings/mls_profiles`. Profiles are checked when the
 * handler is created, so a bad update frequency fails at start-up, not on a request.
 */

export interface MlsProfile {
  readonly originating_system_name: string;
  readonly originating_system_full_name: string;
  /** Keeps its `{{current_year}}` token; the client replaces it. */
  readonly disclaimer: string;
  readonly mls_logo: string;
  /** "<number> <unit>", e.g. "12 hours", "1 day", "15 minutes", "1 week". */
  readonly required_update_frequency: string;
}

export type ProfilesFile = Readonly<Record<string, MlsProfile>>;

export interface ProfileView extends MlsProfile {
  readonly current_year: string;
  readonly required_update_frequency_hours: string;
}

interface Frequency {
  readonly text: string;
  readonly hours: string;
}

const UNITS: ReadonlyArray<readonly [RegExp, string, number]> = [
  [/^(?:m|min|mins|minute|minutes)$/i, 'minute', 1],
  [/^(?:h|hr|hrs|hour|hours)$/i, 'hour', 60],
  [/^(?:d|day|days)$/i, 'day', 1440],
  [/^(?:w|wk|wks|week|weeks)$/i, 'week', 10080],
];

/**
 * "<number> <unit>" normalized (unit minutes, hours, days or weeks, singular for 1) and the
 * interval in hours as a decimal string: "12", "0.25", "168". Hours that do not end within six
 * decimals are rounded to six ("20 minutes" → "0.333333").
 */
export function parseFrequency(text: string): Frequency | null {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]+)\s*$/.exec(text);
  if (!m) return null;
  const unit = UNITS.find(([re]) => re.test(m[2]));
  if (!unit) return null;
  const amount = Number(m[1]);
  if (!(amount > 0)) return null;
  const amountText = String(amount);
  const minutes = amount * unit[2];
  const hoursText = decimal(minutes / 60);
  return { text: `${amountText} ${unit[1]}${amount === 1 ? '' : 's'}`, hours: hoursText };
}

function decimal(x: number): string {
  const fixed = x.toFixed(6);
  return fixed.includes('.') ? fixed.replace(/0+$/, '').replace(/\.$/, '') : fixed;
}

interface CheckedProfile {
  readonly profile: MlsProfile;
  readonly frequency: Frequency;
}

export class Profiles {
  private readonly byCode: ReadonlyMap<string, CheckedProfile>;

  constructor(file: unknown) {
    const byCode = new Map<string, CheckedProfile>();
    if (file !== null && file !== undefined) {
      if (typeof file !== 'object' || Array.isArray(file)) throw new TypeError('mls_profiles: expected an object of profiles by source code');
      for (const [code, raw] of Object.entries(file as Record<string, unknown>)) {
        const p = (raw ?? {}) as Record<string, unknown>;
        for (const k of ['originating_system_name', 'originating_system_full_name', 'disclaimer', 'mls_logo', 'required_update_frequency']) {
          if (typeof p[k] !== 'string') throw new TypeError(`mls_profiles: ${code}.${k} must be a string`);
        }
        const frequency = parseFrequency(p.required_update_frequency as string);
        if (!frequency) {
          throw new TypeError(
            `mls_profiles: ${code}.required_update_frequency '${String(p.required_update_frequency)}' is not "<number> <minutes|hours|days|weeks>"`,
          );
        }
        byCode.set(code, { profile: p as unknown as MlsProfile, frequency });
      }
    }
    this.byCode = byCode;
  }

  fullName(code: string): string | undefined {
    return this.byCode.get(code)?.profile.originating_system_full_name;
  }

  /** `{"resources":{"listings":[...]}}`: every source of the account, in the account's order. */
  resources(sources: readonly string[]): { resources: { listings: Array<{ originating_system_name: string; originating_system_full_name: string }> } } {
    return {
      resources: {
        listings: sources.map((code) => ({ originating_system_name: code, originating_system_full_name: this.fullName(code) ?? code })),
      },
    };
  }

  /** `{"profiles":{...}}`: the profiles of the account's sources (codes matched case-sensitively). */
  view(sources: readonly string[], year: number): { profiles: Record<string, ProfileView> } {
    const profiles: Record<string, ProfileView> = {};
    for (const code of sources) {
      const c = this.byCode.get(code);
      if (!c || Object.prototype.hasOwnProperty.call(profiles, code)) continue;
      const p = c.profile;
      Object.defineProperty(profiles, code, {
        enumerable: true,
        writable: true,
        configurable: true,
        value: {
          originating_system_name: p.originating_system_name,
          originating_system_full_name: p.originating_system_full_name,
          disclaimer: p.disclaimer,
          mls_logo: p.mls_logo,
          current_year: String(year),
          required_update_frequency: c.frequency.text,
          required_update_frequency_hours: c.frequency.hours,
        },
      });
    }
    return { profiles };
  }
}
