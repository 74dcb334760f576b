/**
 * One listing and its children, generated from (seed, index) alone: each listing has its own PRNG
 * stream, so record i never depends on the records before it, and any slice of a data set can be
 * regenerated on its own.
 */
import { Rng, Weighted } from './prng.js';
import {
  DIRECTIONS,
  FIRST_NAMES,
  LAST_NAMES,
  LOOKUPS,
  MLS_TABLE,
  OFFICE_KINDS,
  OFFICE_WORDS,
  PHOTO_ROOMS,
  PROPERTY_TYPES,
  REMARK_ADJECTIVES,
  REMARK_PHRASES,
  STANDARD_STATUS_WEIGHTS,
  STREET_NAMES,
  STREET_SUFFIXES,
  type City,
  type Mls,
} from './tables.js';

export type JsonRecord = Record<string, unknown>;

export interface GeneratedListing {
  readonly property: JsonRecord;
  readonly media: JsonRecord[];
  readonly openHouses: JsonRecord[];
  readonly changes: JsonRecord[];
}

const DAY = 86_400_000;
const HOUR = 3_600_000;

interface Member {
  key: string;
  first: string;
  last: string;
  full: string;
  mlsId: string;
  office: Office;
}
interface Office {
  key: string;
  name: string;
  mlsId: string;
}

/** The roster a data set's listings name: every member and office of every MLS's pool. */
export interface GeneratedRoster {
  readonly members: JsonRecord[];
  readonly offices: JsonRecord[];
}
interface Street {
  dirPrefix?: string;
  name: string;
  suffix: readonly [string, string];
  dirSuffix?: string;
}

/** Everything shared by the listings of one data set, derived from the seed once. */
export class GeneratorContext {
  readonly seed: string;
  readonly reference: number;
  private readonly mlsChoice: Weighted<Mls>;
  private readonly statusChoice = new Weighted(STANDARD_STATUS_WEIGHTS);
  private readonly typeChoice = new Weighted(PROPERTY_TYPES.map(([t, w, subs]) => [[t, new Weighted(subs)] as const, w] as const));
  private readonly cityChoice = new Map<Mls, Weighted<City>>();
  private readonly members = new Map<Mls, Member[]>();
  private readonly offices = new Map<Mls, Office[]>();
  private readonly streets = new Map<City, Street[]>();
  private readonly remarkChoice = Weighted.zipf(REMARK_PHRASES);
  private readonly lookupChoice = new Map<keyof typeof LOOKUPS, Weighted<number>>();

  constructor(seed: string, reference: number, listings: number) {
    this.seed = seed;
    this.reference = reference;
    this.mlsChoice = new Weighted(MLS_TABLE.map((m, i) => [m, i === 0 ? 2 : 1] as const));
    const membersPerMls = Math.max(30, Math.min(4000, Math.ceil(listings / MLS_TABLE.length / 40)));
    for (const mls of MLS_TABLE) {
      this.cityChoice.set(mls, new Weighted(mls.cities.map((c, i) => [c, i === 0 ? 5 : 2] as const)));
      const rng = new Rng(`${seed}:members:${mls.code}`);
      const offices: Office[] = [];
      const officeCount = Math.max(8, Math.ceil(membersPerMls / 12));
      for (let o = 0; o < officeCount; o++) {
        const mlsId = `${mls.idPrefix}O${String(1000 + o * 7)}`;
        offices.push({
          key: `O-${mlsId}`,
          name: `${rng.pick(OFFICE_WORDS)} ${rng.pick(OFFICE_KINDS)}${o >= OFFICE_WORDS.length ? ` ${rng.pick(mls.cities).name}` : ''}`,
          mlsId,
        });
      }
      this.offices.set(mls, offices);
      const list: Member[] = [];
      for (let m = 0; m < membersPerMls; m++) {
        const first = rng.pick(FIRST_NAMES);
        const last = rng.pick(LAST_NAMES);
        const mlsId = `${mls.idPrefix}${String(100000 + m * 13)}`;
        list.push({ key: `M-${mlsId}`, first, last, full: `${first} ${last}`, mlsId, office: rng.pick(offices) });
      }
      this.members.set(mls, list);
      for (const city of mls.cities) {
        const srng = new Rng(`${seed}:streets:${city.name}`);
        const streets: Street[] = [];
        for (const name of srng.subset(STREET_NAMES, 70)) {
          const street: Street = { name, suffix: srng.pick(STREET_SUFFIXES) };
          if (srng.chance(0.25)) street.dirPrefix = srng.pick(DIRECTIONS);
          else if (srng.chance(0.04)) street.dirSuffix = srng.pick(DIRECTIONS);
          streets.push(street);
        }
        this.streets.set(city, streets);
      }
    }
    for (const key of Object.keys(LOOKUPS) as (keyof typeof LOOKUPS)[]) {
      this.lookupChoice.set(key, Weighted.zipf(LOOKUPS[key].map((_, i) => i)));
    }
  }

  listing(index: number): GeneratedListing {
    return buildListing(this, new Rng(`${this.seed}:listing:${index}`), index);
  }

  /**
   * The Member and Office records of every agent and office the listings can name, MLS by MLS in
   * MLS_TABLE order, in pool order. Contact details come from a stream of their own per MLS, so the
   * pools (and so the listings) are the same as without a roster.
   */
  roster(): GeneratedRoster {
    const members: JsonRecord[] = [];
    const offices: JsonRecord[] = [];
    const day = Math.floor(this.reference / DAY) * DAY;
    for (const mls of MLS_TABLE) {
      const rng = new Rng(`${this.seed}:roster:${mls.code}`);
      const modified = (): string => isoTime(day - rng.int(1, 400) * DAY - rng.int(0, 86_399) * 1000);
      const phone = (): string => `${String(rng.int(200, 989))}-${String(rng.int(200, 999))}-${String(rng.int(0, 9999)).padStart(4, '0')}`;
      for (const o of this.offices.get(mls)!) {
        const city = rng.pick(mls.cities);
        const domain = `${o.name.toLowerCase().replace(/[^a-z0-9]+/g, '')}.example.com`;
        offices.push({
          OfficeKey: o.key,
          OfficeMlsId: o.mlsId,
          OfficeName: o.name,
          OfficePhone: phone(),
          OfficeEmail: `info@${domain}`,
          OfficeCity: city.name,
          OfficeStateOrProvince: city.state,
          OfficePostalCode: rng.pick(city.postalCodes),
          OfficeStatus: 'Active',
          OriginatingSystemName: mls.code,
          ModificationTimestamp: modified(),
        });
      }
      for (const m of this.members.get(mls)!) {
        const city = rng.pick(mls.cities);
        const record: JsonRecord = {
          MemberKey: m.key,
          MemberMlsId: m.mlsId,
          MemberFirstName: m.first,
          MemberLastName: m.last,
          MemberFullName: m.full,
          MemberEmail: `${m.first}.${m.last}.${m.mlsId}@example.com`
            .normalize('NFKD')
            .replace(/\p{M}/gu, '')
            .toLowerCase()
            .replace(/[^a-z0-9.@]+/g, ''),
          MemberPreferredPhone: phone(),
          MemberStateLicense: `${city.state}${String(rng.int(1_000_000, 9_999_999))}`,
          MemberStateLicenseState: city.state,
          MemberStatus: rng.chance(0.97) ? 'Active' : 'Inactive',
          OfficeKey: m.office.key,
          OfficeMlsId: m.office.mlsId,
          OfficeName: m.office.name,
          OriginatingSystemName: mls.code,
          ModificationTimestamp: modified(),
        };
        members.push(record);
      }
    }
    return { members, offices };
  }

  // Accessors used by buildListing; kept on the context so the tables are built once.
  pickMls(rng: Rng): Mls {
    return this.mlsChoice.pick(rng);
  }
  pickCity(rng: Rng, mls: Mls): City {
    return this.cityChoice.get(mls)!.pick(rng);
  }
  pickStatus(rng: Rng): string {
    return this.statusChoice.pick(rng);
  }
  pickType(rng: Rng): readonly [string, Weighted<string>] {
    return this.typeChoice.pick(rng);
  }
  pickMember(rng: Rng, mls: Mls): Member {
    return rng.pick(this.members.get(mls)!);
  }
  pickStreet(rng: Rng, city: City): Street {
    return rng.pick(this.streets.get(city)!);
  }
  pickRemark(rng: Rng): string {
    return this.remarkChoice.pick(rng);
  }

  /** k distinct values of a lookup, Zipf-weighted, in table order. */
  pickLookups(rng: Rng, key: keyof typeof LOOKUPS, k: number): string[] {
    const values = LOOKUPS[key];
    const choice = this.lookupChoice.get(key)!;
    const chosen = new Set<number>();
    for (let attempts = 0; chosen.size < Math.min(k, values.length) && attempts < k * 8; attempts++) chosen.add(choice.pick(rng));
    return [...chosen].sort((a, b) => a - b).map((i) => values[i]);
  }
}

const clamp = (x: number, lo: number, hi: number): number => Math.min(hi, Math.max(lo, x));
const round6 = (x: number): number => Math.round(x * 1e6) / 1e6;
const isoDate = (ms: number): string => new Date(ms).toISOString().slice(0, 10);
const isoTime = (ms: number): string => new Date(ms).toISOString();
const wordCount = (s: string): number => s.split(' ').length;

function buildListing(ctx: GeneratorContext, rng: Rng, index: number): GeneratedListing {
  const ref = ctx.reference;
  const mls = ctx.pickMls(rng);
  const city = ctx.pickCity(rng, mls);
  const status = ctx.pickStatus(rng);
  const [propertyType, subChoice] = ctx.pickType(rng);
  const subType = subChoice.pick(rng);
  const lease = propertyType === 'Residential Lease' || propertyType === 'Commercial Lease';
  const land = propertyType === 'Land';
  const commercial = propertyType.startsWith('Commercial');
  const farm = propertyType === 'Farm';
  const multiUnit = ['Condominium', 'Apartment', 'Stock Cooperative'].includes(subType);
  const listingKey = `P${String(index + 1).padStart(9, '0')}`;

  // Timeline (epoch ms, all before the reference instant).
  const minute = (ms: number): number => Math.floor(ms / 60_000) * 60_000 + rng.int(0, 59) * 1000;
  const ageDays =
    status === 'Coming Soon'
      ? rng.range(0, 10)
      : status === 'Closed'
        ? rng.range(40, 730)
        : ['Active', 'Active Under Contract', 'Pending'].includes(status)
          ? rng.range(1, 200)
          : rng.range(60, 500);
  const entry = minute(ref - ageDays * DAY);
  const contractDate = entry - rng.int(0, 3) * DAY;
  let onMarket: number | undefined = status === 'Coming Soon' ? undefined : entry;
  const relisted = onMarket !== undefined && status !== 'Closed' && rng.chance(0.05) && ageDays > 60;
  const events: Array<{ at: number; field: string; prev?: string; next: string; type: string }> = [];
  if (onMarket !== undefined) events.push({ at: onMarket, field: 'StandardStatus', next: 'Active', type: 'New Listing' });
  else events.push({ at: entry, field: 'StandardStatus', next: 'Coming Soon', type: 'Coming Soon' });
  if (relisted && onMarket !== undefined) {
    const off = onMarket + rng.range(10, 30) * DAY;
    const back = minute(off + rng.range(10, 30) * DAY);
    events.push({ at: off, field: 'StandardStatus', prev: 'Active', next: 'Withdrawn', type: 'Withdrawn' });
    events.push({ at: back, field: 'StandardStatus', prev: 'Withdrawn', next: 'Active', type: 'Back On Market' });
    onMarket = back;
  }
  const marketStart = onMarket ?? entry;
  const span = Math.max(DAY, ref - marketStart);
  let pendingAt: number | undefined;
  let closeAt: number | undefined;
  if (status === 'Closed') {
    pendingAt = minute(marketStart + rng.range(0.05, 0.6) * span);
    closeAt = Math.min(ref - DAY, pendingAt + rng.range(20, 45) * DAY);
    events.push({ at: pendingAt, field: 'StandardStatus', prev: 'Active', next: 'Pending', type: 'Pending' });
    events.push({ at: closeAt, field: 'StandardStatus', prev: 'Pending', next: 'Closed', type: 'Closed' });
  } else if (status !== 'Active' && status !== 'Coming Soon') {
    pendingAt = minute(marketStart + rng.range(0.3, 0.95) * span);
    events.push({ at: pendingAt, field: 'StandardStatus', prev: 'Active', next: status, type: status });
  }

  // Structure and lot.
  let livingArea: number | undefined;
  let beds: number | undefined;
  let baths: number | undefined;
  let lot: number | undefined;
  let stories: number | undefined;
  let garage: number | undefined;
  if (!land && !farm) {
    if (commercial) livingArea = Math.round(clamp(6000 + rng.normal() * 5000, 800, 60000));
    else if (multiUnit) livingArea = Math.round(clamp(1050 + rng.normal() * 350, 350, 4200));
    else if (subType === 'Townhouse') livingArea = Math.round(clamp(1600 + rng.normal() * 450, 700, 4000));
    else if (propertyType === 'Residential Income') livingArea = Math.round(clamp(2800 + rng.normal() * 900, 1200, 9000));
    else livingArea = Math.round(clamp(2100 + rng.normal() * 750, 600, 9500));
    if (!commercial) {
      beds =
        propertyType === 'Residential Income'
          ? Math.round(clamp(livingArea / 500 + rng.normal(), 2, 12))
          : Math.round(clamp(livingArea / 580 + rng.normal() * 0.6, multiUnit ? 0 : 1, 8));
      baths = Math.round(clamp(beds * 0.7 + 0.6 + rng.normal() * 0.4, 1, 8));
      stories = multiUnit ? 1 : rng.pick([1, 1, 1, 2, 2, 3]);
      garage = multiUnit ? rng.pick([0, 1, 1, 2]) : rng.pick([0, 1, 2, 2, 2, 3]);
    } else {
      stories = rng.int(1, 4);
    }
  }
  if (land) lot = Math.round(rng.range(5000, 400000));
  else if (farm) lot = Math.round(rng.range(200000, 4000000));
  else if (commercial) lot = Math.round(rng.range(5000, 80000));
  else if (subType === 'Townhouse') lot = Math.round(rng.range(1200, 4000));
  else if (!multiUnit) lot = Math.round(rng.range(3000, 25000));
  const refYear = new Date(ref).getUTCFullYear();
  const u = rng.next();
  const yearBuilt = land ? undefined : refYear - 1 - Math.floor(118 * u * u);

  // Prices.
  const quality = 0.75 + rng.next() * 0.5;
  let listPrice: number;
  if (lease) listPrice = Math.max(800, Math.round(((livingArea ?? 1000) * city.pricePerSqft * 0.0045 * quality) / 25) * 25);
  else if (land || farm) listPrice = Math.max(15000, Math.round(((lot ?? 10000) * (city.pricePerSqft / 25) * quality) / 1000) * 1000);
  else listPrice = Math.max(50000, Math.round(((livingArea ?? 1500) * city.pricePerSqft * quality) / 1000) * 1000);
  let originalListPrice = listPrice;
  let priceChangeAt: number | undefined;
  if (rng.chance(0.3) && onMarket !== undefined) {
    const drop = 0.02 + rng.next() * 0.08;
    originalListPrice = lease ? Math.round(listPrice / (1 - drop) / 25) * 25 : Math.round(listPrice / (1 - drop) / 1000) * 1000;
    priceChangeAt = minute(marketStart + rng.range(0.1, 0.9) * ((pendingAt ?? ref) - marketStart));
    events.push({ at: priceChangeAt, field: 'ListPrice', prev: String(originalListPrice), next: String(listPrice), type: 'Price Change' });
  }
  const closePrice = status === 'Closed' ? Math.round((listPrice * (0.95 + rng.next() * 0.1)) / (lease ? 5 : 500)) * (lease ? 5 : 500) : undefined;

  events.sort((a, b) => a.at - b.at);
  const lastEvent = events[events.length - 1].at;
  const modification = Math.min(ref, minute(lastEvent + rng.range(0, 2) * DAY));
  const statusChangeAt = [...events].reverse().find((e) => e.field === 'StandardStatus')!.at;

  // Address.
  const street = ctx.pickStreet(rng, city);
  const streetNumber = String(rng.chance(0.05) ? rng.int(1, 99) : rng.int(100, 19999));
  const suffix = mls.suffixStyle === 'abbreviation' ? street.suffix[1] : street.suffix[0];
  const unit = multiUnit || (subType === 'Townhouse' && rng.chance(0.3)) ? `${rng.int(1, 30)}${rng.pick(['', '', '01', '02', 'A', 'B'])}` : undefined;
  const unparsed = [streetNumber, street.dirPrefix, street.name, suffix, street.dirSuffix, unit ? `Unit ${unit}` : undefined]
    .filter((p) => p !== undefined)
    .join(' ');

  // Coordinates, with the defects a real feed has.
  let latitude: number | undefined = round6(city.lat + city.dLat * (rng.next() + rng.next() - 1));
  let longitude: number | undefined = round6(city.lon + city.dLon * (rng.next() + rng.next() - 1));
  let latitudeOnly = false;
  const geoDefect = rng.next();
  if (geoDefect < 0.015) {
    latitude = undefined;
    longitude = undefined;
  } else if (geoDefect < 0.02) {
    latitudeOnly = true;
    longitude = undefined;
  } else if (geoDefect < 0.027) {
    latitude = 0;
    longitude = 0;
  } else if (geoDefect < 0.029) {
    const t = latitude;
    latitude = longitude;
    longitude = t;
  }

  // Members.
  const listAgent = ctx.pickMember(rng, mls);
  const coListAgent = rng.chance(0.15) ? ctx.pickMember(rng, mls) : undefined;
  const sold = status === 'Closed' || status === 'Pending' || status === 'Active Under Contract';
  const buyerAgent = sold && rng.chance(0.85) ? ctx.pickMember(rng, mls) : undefined;
  const coBuyerAgent = buyerAgent && rng.chance(0.05) ? ctx.pickMember(rng, mls) : undefined;

  // Features (lookups). Land and commercial listings carry few.
  const residential = !land && !commercial && !farm;
  const appliances = residential ? ctx.pickLookups(rng, 'Appliances', rng.int(2, 9)) : [];
  const style = residential && !multiUnit ? ctx.pickLookups(rng, 'ArchitecturalStyle', rng.chance(0.15) ? 2 : 1) : [];
  const heating = !land ? ctx.pickLookups(rng, 'Heating', rng.int(1, 3)) : [];
  const cooling = !land ? ctx.pickLookups(rng, 'Cooling', rng.int(1, 2)) : [];
  const interior = residential ? ctx.pickLookups(rng, 'InteriorFeatures', rng.int(2, 8)) : [];
  const parking = !land ? ctx.pickLookups(rng, 'ParkingFeatures', rng.int(1, 4)) : [];
  const waterBias = city.state === 'FL' || city.state === 'WA' ? 0.18 : 0.05;
  const waterfront = rng.chance(waterBias) ? ctx.pickLookups(rng, 'WaterfrontFeatures', rng.int(1, 3)) : [];
  const view = rng.chance(0.35) ? ctx.pickLookups(rng, 'View', rng.int(1, 3)) : [];
  const poolBias = ['AZ', 'FL', 'CA', 'TX'].includes(city.state) ? 0.3 : 0.06;
  const pool = residential ? rng.chance(poolBias) : undefined;

  // Remarks: an opening line, then Zipf-weighted phrases up to a 40-150 word target.
  const subWord = subType.toLowerCase();
  let remarks =
    beds !== undefined && beds > 0
      ? `This ${rng.pick(REMARK_ADJECTIVES)} ${beds}-bedroom ${subWord} in ${city.name} is ready for you.`
      : `This ${rng.pick(REMARK_ADJECTIVES)} ${subWord} property in ${city.name} is ready for you.`;
  if (pool) remarks += ' Sparkling private pool.';
  let words = wordCount(remarks);
  const target = rng.int(40, 150);
  const used = new Set<string>();
  for (let attempts = 0; words < target && attempts < 200; attempts++) {
    const phrase = ctx.pickRemark(rng);
    if (used.has(phrase)) continue;
    used.add(phrase);
    const w = wordCount(phrase);
    if (words + w > 150) {
      if (words >= 40) break;
      continue;
    }
    remarks += ` ${phrase}`;
    words += w;
  }

  // Media (photos first), then the property record that counts them.
  const listingId = `${mls.idPrefix}${String(((index * 7919 + 1000003) % 9000000) + 1000000)}`;
  const mediaCount = rng.chance(0.03) ? 0 : status === 'Closed' ? rng.int(0, 25) : rng.int(4, 40);
  const media: JsonRecord[] = [];
  const preferredOrder = mediaCount > 0 && rng.chance(0.7) ? (rng.chance(0.8) ? 1 : rng.int(1, mediaCount)) : 0;
  const emitsFalse = mls.code.length % 2 === 0;
  let photos = 0;
  for (let order = 1; order <= mediaCount; order++) {
    const c = rng.next();
    const category = order === 1 || c < 0.9 ? 'Photo' : c < 0.94 ? 'Floor Plan' : c < 0.96 ? 'Video' : c < 0.98 ? 'Unbranded Virtual Tour' : 'Document';
    const rec: JsonRecord = {
      MediaKey: `${listingKey}-M${String(order).padStart(2, '0')}`,
      ResourceName: 'Property',
      ResourceRecordKey: listingKey,
      Order: order,
      MediaCategory: category,
    };
    const base = `https://media.example.com/${mls.code.toLowerCase()}/${listingKey}/${order}`;
    if (category === 'Photo' || category === 'Floor Plan') {
      photos += category === 'Photo' ? 1 : 0;
      const [w, h] = rng.pick([
        [2048, 1536],
        [1024, 768],
        [1600, 1067],
        [3000, 2000],
        [1280, 960],
      ] as const);
      rec.MediaType = 'jpeg';
      rec.MediaURL = `${base}.jpg`;
      rec.ImageWidth = w;
      rec.ImageHeight = h;
      if (category === 'Photo') rec.ImageOf = order === 1 ? 'Front of Structure' : rng.pick(PHOTO_ROOMS);
    } else if (category === 'Video') {
      rec.MediaType = 'mp4';
      rec.MediaURL = `${base}.mp4`;
    } else if (category === 'Document') {
      rec.MediaType = 'pdf';
      rec.MediaURL = `${base}.pdf`;
    } else {
      rec.MediaURL = `https://tours.example.com/${listingKey}`;
    }
    if (order === preferredOrder && category === 'Photo') rec.PreferredPhotoYN = true;
    else if (emitsFalse) rec.PreferredPhotoYN = false;
    rec.ModificationTimestamp = isoTime(Math.min(ref, minute(entry + rng.range(0, 5) * DAY)));
    media.push(rec);
  }

  const p: JsonRecord = {};
  p.ListingKey = listingKey;
  p.ListingId = listingId;
  p.OriginatingSystemName = mls.code;
  p.StandardStatus = status;
  p.MlsStatus = mls.localStatus[status] ?? status;
  p.PropertyType = propertyType;
  p.PropertySubType = subType;
  p.ListPrice = listPrice;
  p.OriginalListPrice = originalListPrice;
  if (closePrice !== undefined) p.ClosePrice = closePrice;
  if (closeAt !== undefined) p.CloseDate = isoDate(closeAt);
  if (pendingAt !== undefined && (status === 'Closed' || status === 'Pending')) p.PurchaseContractDate = isoDate(pendingAt);
  if (beds !== undefined) p.BedroomsTotal = beds;
  if (baths !== undefined && !rng.chance(0.01)) p.BathroomsTotalInteger = baths;
  if (livingArea !== undefined && !rng.chance(0.02)) p.LivingArea = livingArea;
  if (lot !== undefined && !rng.chance(0.04)) p.LotSizeSquareFeet = lot;
  if (yearBuilt !== undefined && !rng.chance(0.03)) p.YearBuilt = yearBuilt;
  if (stories !== undefined) p.Stories = stories;
  if (garage !== undefined) p.GarageSpaces = garage;
  if (pool !== undefined) p.PoolPrivateYN = pool;
  p.StreetNumber = streetNumber;
  if (street.dirPrefix) p.StreetDirPrefix = street.dirPrefix;
  p.StreetName = street.name;
  p.StreetSuffix = suffix;
  if (street.dirSuffix) p.StreetDirSuffix = street.dirSuffix;
  if (unit) p.UnitNumber = unit;
  p.UnparsedAddress = unparsed;
  p.City = city.name;
  p.StateOrProvince = city.state;
  if (!rng.chance(0.005)) p.PostalCode = rng.pick(city.postalCodes);
  p.CountyOrParish = city.county;
  if (latitude !== undefined) p.Latitude = latitude;
  if (longitude !== undefined && !latitudeOnly) p.Longitude = longitude;
  if (appliances.length) p.Appliances = appliances;
  if (style.length) p.ArchitecturalStyle = style;
  if (heating.length) p.Heating = heating;
  if (cooling.length) p.Cooling = cooling;
  if (interior.length) p.InteriorFeatures = interior;
  if (parking.length) p.ParkingFeatures = parking;
  if (waterfront.length) p.WaterfrontFeatures = waterfront;
  if (view.length) p.View = view;
  p.PublicRemarks = remarks;
  // A few feeds send only first and last names (search falls back to them).
  if (rng.chance(0.95)) p.ListAgentFullName = listAgent.full;
  p.ListAgentFirstName = listAgent.first;
  p.ListAgentLastName = listAgent.last;
  p.ListAgentMlsId = listAgent.mlsId;
  p.ListAgentKey = listAgent.key;
  if (coListAgent) {
    p.CoListAgentFullName = coListAgent.full;
    p.CoListAgentMlsId = coListAgent.mlsId;
    p.CoListAgentKey = coListAgent.key;
  }
  if (buyerAgent) {
    p.BuyerAgentFullName = buyerAgent.full;
    p.BuyerAgentMlsId = buyerAgent.mlsId;
    p.BuyerAgentKey = buyerAgent.key;
  }
  if (coBuyerAgent) {
    p.CoBuyerAgentFullName = coBuyerAgent.full;
    p.CoBuyerAgentKey = coBuyerAgent.key;
  }
  p.ListOfficeName = listAgent.office.name;
  p.ListOfficeMlsId = listAgent.office.mlsId;
  p.ListOfficeKey = listAgent.office.key;
  if (coListAgent && coListAgent.office !== listAgent.office) {
    p.CoListOfficeName = coListAgent.office.name;
    p.CoListOfficeKey = coListAgent.office.key;
  }
  if (buyerAgent) {
    p.BuyerOfficeName = buyerAgent.office.name;
    p.BuyerOfficeMlsId = buyerAgent.office.mlsId;
    p.BuyerOfficeKey = buyerAgent.office.key;
  }
  if (coBuyerAgent && buyerAgent && coBuyerAgent.office !== buyerAgent.office) {
    p.CoBuyerOfficeName = coBuyerAgent.office.name;
    p.CoBuyerOfficeKey = coBuyerAgent.office.key;
  }
  if (!rng.chance(0.02)) p.OriginalEntryTimestamp = isoTime(entry);
  p.ListingContractDate = isoDate(contractDate);
  if (onMarket !== undefined) p.OnMarketTimestamp = isoTime(onMarket);
  p.StatusChangeTimestamp = isoTime(statusChangeAt);
  if (priceChangeAt !== undefined) p.PriceChangeTimestamp = isoTime(priceChangeAt);
  p.ModificationTimestamp = isoTime(modification);
  p.PhotosCount = photos;

  // Open houses for listings on the market now.
  const openHouses: JsonRecord[] = [];
  if ((status === 'Active' || status === 'Coming Soon') && rng.chance(0.25)) {
    const n = rng.int(1, 3);
    const offsetMs = parseOffset(city.utcOffset);
    const refDay = Math.floor(ref / DAY) * DAY;
    for (let k = 1; k <= n; k++) {
      const localDay = refDay + rng.int(-10, 14) * DAY;
      const startLocal = localDay + rng.int(10, 14) * HOUR;
      const endLocal = startLocal + rng.int(2, 3) * HOUR;
      const startInstant = startLocal - offsetMs;
      const agent = rng.chance(0.8) ? listAgent : ctx.pickMember(rng, mls);
      const oh: JsonRecord = {
        OpenHouseKey: `${listingKey}-OH${k}`,
        ListingKey: listingKey,
        ListingId: listingId,
        OriginatingSystemName: mls.code,
        OpenHouseDate: isoDate(localDay),
        OpenHouseStartTime: `${isoTime(startLocal).slice(0, 19)}${city.utcOffset}`,
        OpenHouseEndTime: `${isoTime(endLocal).slice(0, 19)}${city.utcOffset}`,
        OpenHouseType: rng.chance(0.85) ? 'Public' : rng.chance(0.6) ? 'Broker' : 'Office',
        OpenHouseStatus: rng.chance(0.05) ? 'Canceled' : startInstant < ref ? 'Ended' : 'Active',
        ShowingAgentFirstName: agent.first,
        ShowingAgentLastName: agent.last,
      };
      if (rng.chance(0.4))
        oh.OpenHouseRemarks = rng.pick(['Refreshments served.', 'Please remove shoes.', 'Park on the street.', 'Come see this home!', 'Masks optional.']);
      oh.ModificationTimestamp = isoTime(Math.min(ref - rng.int(1, 72) * HOUR, startInstant - rng.int(1, 10) * DAY));
      openHouses.push(oh);
    }
  }

  const changes: JsonRecord[] = events.map((e, k) => {
    const c: JsonRecord = { PropertyChangeKey: `${listingKey}-C${k + 1}`, ListingKey: listingKey, FieldName: e.field };
    if (e.prev !== undefined) c.PreviousValue = e.prev;
    c.NewValue = e.next;
    c.ChangeType = e.type;
    c.ModificationTimestamp = isoTime(e.at);
    return c;
  });

  return { property: p, media, openHouses, changes };
}

function parseOffset(offset: string): number {
  const m = /^([+-])(\d{2}):(\d{2})$/.exec(offset)!;
  return (m[1] === '-' ? -1 : 1) * (Number(m[2]) * HOUR + Number(m[3]) * 60_000);
}
