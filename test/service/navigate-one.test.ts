/**
 * Single-valued navigation paths (SERVICE.md §2): `Property('K')/ListAgent` (and BuyerAgent,
 * CoListAgent, CoBuyerAgent, ListOffice, BuyerOffice, CoListOffice, CoBuyerOffice) answer the one
 * record `$expand=<Nav>` gives on that listing — through the library (engine.navigateOne) and over
 * HTTP (200 with the target's `$entity` context, or 204 when the listing names none the account
 * sees). Checked against the Member and Office files themselves, for an account limited to some
 * sources; an invisible listing is a 404 EntityNotFound, other names are coded errors.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Engine } from '../../src/engine.js';
import { QueryError } from '../../src/errors.js';
import type { Handler } from '../../src/service/handler.js';
import { BASE, call, defaultEngine, DEMO_SOURCES, expectErrorShape, login, makeHandler, PARTNER_SOURCES, readDefaultFile } from './helpers.js';

type Rec = Record<string, unknown>;
const read = readDefaultFile;
const listings = read('Property.jsonl');
const members = new Map(read('Member.jsonl').map((m) => [m.MemberKey as string, m]));
const offices = new Map(read('Office.jsonl').map((o) => [o.OfficeKey as string, o]));
const REFERENCES = [
  ['ListAgent', 'ListAgentKey', 'Member'],
  ['BuyerAgent', 'BuyerAgentKey', 'Member'],
  ['CoListAgent', 'CoListAgentKey', 'Member'],
  ['CoBuyerAgent', 'CoBuyerAgentKey', 'Member'],
  ['ListOffice', 'ListOfficeKey', 'Office'],
  ['BuyerOffice', 'BuyerOfficeKey', 'Office'],
  ['CoListOffice', 'CoListOfficeKey', 'Office'],
  ['CoBuyerOffice', 'CoBuyerOfficeKey', 'Office'],
] as const;

/** What the files say the path gives: the named record when it exists and its source is one of `sources`, else null. */
function expected(listing: Rec, field: string, target: 'Member' | 'Office', sources: readonly string[], fields: readonly string[]): Rec | null {
  const key = listing[field];
  if (typeof key !== 'string') return null;
  const record = (target === 'Member' ? members : offices).get(key);
  if (record === undefined || !sources.includes(record.OriginatingSystemName as string)) return null;
  return Object.fromEntries(fields.map((f) => [f, record[f] ?? null]));
}

const sample = listings.filter((_, i) => i % 7 === 0);
const visibleTo = (sources: readonly string[]) => sample.filter((l) => sources.includes(l.OriginatingSystemName as string));

describe('engine.navigateOne', () => {
  let engine: Engine;
  beforeAll(async () => {
    engine = await defaultEngine();
  });

  it('gives the record the files name, for every single-valued navigation property, as the account sees it', () => {
    let records = 0;
    let nulls = 0;
    for (const sources of [DEMO_SOURCES, PARTNER_SOURCES]) {
      for (const listing of visibleTo(sources)) {
        for (const [name, field, target] of REFERENCES) {
          const fields = target === 'Member' ? ['MemberKey', 'MemberFullName', 'OriginatingSystemName'] : ['OfficeKey', 'OfficeName', 'OriginatingSystemName'];
          const got = engine.navigateOne('Property', listing.ListingKey as string, name, `$select=${fields.join(',')}`, { sources });
          const want = expected(listing, field, target, sources, fields);
          expect(got, `${listing.ListingKey as string}/${name}`).toEqual(want);
          // the same as $expand on the listing
          const viaExpand = engine.entity('Property', listing.ListingKey as string, `$select=ListingKey&$expand=${name}($select=${fields.join(',')})`, {
            sources,
          });
          expect(viaExpand?.[name]).toEqual(want);
          if (want === null) nulls++;
          else records++;
        }
      }
    }
    expect(records).toBeGreaterThan(100);
    expect(nulls).toBeGreaterThan(10);
  });

  it('throws EntityNotFound for a listing the caller does not see, and coded errors for other names', () => {
    const other = sample.find((l) => !PARTNER_SOURCES.includes(l.OriginatingSystemName as string))!;
    const codeOf = (f: () => unknown): string | undefined => {
      try {
        f();
      } catch (e) {
        return e instanceof QueryError ? e.code : `not a QueryError: ${String(e)}`;
      }
      return undefined;
    };
    expect(codeOf(() => engine.navigateOne('Property', other.ListingKey as string, 'ListAgent', '', { sources: PARTNER_SOURCES }))).toBe('EntityNotFound');
    expect(codeOf(() => engine.navigateOne('Property', 'no-such-key', 'ListAgent', ''))).toBe('EntityNotFound');
    expect(codeOf(() => engine.navigateOne('Property', other.ListingKey as string, 'Media', ''))).toBe('UnknownNavigationProperty');
    expect(codeOf(() => engine.navigateOne('Media', 'x', 'ListAgent', ''))).toBe('UnknownNavigationProperty');
    expect(codeOf(() => engine.navigate('Property', other.ListingKey as string, 'ListAgent', ''))).toBe('SingleValuedNavigation');
    expect(codeOf(() => engine.navigateOne('Property', other.ListingKey as string, 'ListAgent', '$select=NoSuchField'))).toBe('UnknownField');
  });
});

describe('GET Property(KEY)/<single-valued Nav>', () => {
  let handler: Handler;
  let partner: string;
  beforeAll(async () => {
    ({ handler } = await makeHandler());
    partner = await login(handler, 'partner');
  });

  it('answers the record with its $entity context, or 204 when there is none to show', async () => {
    let seen200 = 0;
    let seen204 = 0;
    for (const listing of visibleTo(PARTNER_SOURCES).slice(0, 40)) {
      for (const [name, field, target] of REFERENCES) {
        const keyField = target === 'Member' ? 'MemberKey' : 'OfficeKey';
        const c = await call(handler, `/v1/listings/data/Property('${listing.ListingKey as string}')/${name}?$select=${keyField}`, { token: partner });
        const want = expected(listing, field, target, PARTNER_SOURCES, [keyField]);
        if (want === null) {
          expect(c.status, c.text).toBe(204);
          expect(c.text).toBe('');
          seen204++;
        } else {
          expect(c.status, c.text).toBe(200);
          expect(c.json).toEqual({ '@odata.context': `${BASE}/v1/listings/data/$metadata#${target}(${keyField})/$entity`, ...want });
          seen200++;
        }
      }
    }
    expect(seen200).toBeGreaterThan(20);
    expect(seen204).toBeGreaterThan(5);
  });

  it('is a 404 for a listing of another source exactly as for an unknown key; options that do not apply are 400s', async () => {
    const other = sample.find((l) => !PARTNER_SOURCES.includes(l.OriginatingSystemName as string))!;
    const hidden = await call(handler, `/v1/listings/data/Property('${other.ListingKey as string}')/ListAgent`, { token: partner });
    const unknown = await call(handler, `/v1/listings/data/Property('NoSuchListing')/ListAgent`, { token: partner });
    expectErrorShape(hidden, 404, 'EntityNotFound');
    expectErrorShape(unknown, 404, 'EntityNotFound');
    const mine = visibleTo(PARTNER_SOURCES)[0];
    expectErrorShape(
      await call(handler, `/v1/listings/data/Property('${mine.ListingKey as string}')/ListAgent?$top=1`, { token: partner }),
      400,
      'QueryOptionNotAllowed',
    );
    expectErrorShape(
      await call(handler, `/v1/listings/data/Property('${mine.ListingKey as string}')/ListAgentKey`, { token: partner }),
      404,
      'UnknownNavigationProperty',
    );
  });
});
