/**
 * Data and queries the search suites share: the in-memory suite (test/search/search.test.ts) and
 * the PostgreSQL one (test/pg/search.test.ts) run the same cases.
 */
import type { SearchFieldName } from '../../src/schema/search-fields.js';
import { tokenize } from '../../src/search/tokenize.js';

type Rec = Record<string, unknown>;

/** The BM25 cases on the generated data set (`sample(i)` is a listing of it). */
export function bm25Queries(sample: (i: number) => Rec): Array<[SearchFieldName, string, number?]> {
  return [
    ['KeywordSearchText', 'pool granite'],
    ['KeywordSearchText', 'dishwasher'],
    ['KeywordSearchText', 'pool granite spa', 2],
    ['KeywordSearchText', 'sparkling pool pool'],
    ['KeywordSearchText', 'quartz gas range double oven', 1],
    ['KeywordSearchText', 'nonexistentword'],
    ['ListAgentSearchText', `${sample(1).ListAgentFirstName as string} ${sample(1).ListAgentLastName as string}`],
    ['ListAgentSearchText', 'jose'],
    ['ListAgentSearchText', "o'brien"],
    ['BuyerAgentSearchText', 'smith'],
    ['ListOfficeSearchText', 'summit realty'],
    ['BuyerOfficeSearchText', 'realty group', 1],
    ['RawAddressSearchText', `${sample(2).StreetNumber as string} ${sample(2).StreetName as string}`],
    ['RawAddressSearchText', `${sample(3).UnparsedAddress as string} ${sample(3).City as string}`],
    ['RawAddressSearchText', `${sample(4).StreetName as string} ${sample(4).City as string} ${sample(4).PostalCode as string}`, 3],
    ['RawAddressSearchText', `${sample(5).StreetNumber as string} ${(sample(5).StreetName as string).slice(0, 3)}`],
    ['RawAddressSearchText', 'washingtn street seattle'],
    ['RawAddressSearchText', 'main st phoenix az'],
    ['RawAddressSearchText', 'n 7th ave'],
    ['RawAddressSearchText', 'hawthorne blvd sprin'],
  ];
}

/** The i-th random address and keyword query built from a listing of the data set. */
export function randomQueries(sample: (i: number) => Rec, i: number): { address: string; keyword: string } {
  const r = sample(i + 10);
  const words = [r.StreetNumber, r.StreetDirPrefix, r.StreetName, r.StreetSuffix, r.City, r.PostalCode, 'zzqx'].filter((w) => w !== undefined).map(String);
  const address = words.filter((_, k) => (i >> k) & 1 || k === 2).join(' ');
  const keyword = tokenize(r.PublicRemarks as string)
    .filter((_, k) => k % (3 + (i % 5)) === 1)
    .slice(0, 1 + (i % 4))
    .join(' ');
  return { address, keyword };
}

/** w1 .. w10; row k holds the words w1..wk, so a query of n words matches row k on min(k, n) terms. */
export const THRESHOLD_WORDS = Array.from({ length: 10 }, (_, i) => `w${i + 1}`);
export const THRESHOLD_RECORDS: Rec[] = THRESHOLD_WORDS.map((_, k) => ({
  ListingKey: `K${k + 1}`,
  UnparsedAddress: THRESHOLD_WORDS.slice(0, k + 1).join(' '),
  PublicRemarks: THRESHOLD_WORDS.slice(0, k + 1).join(' '),
}));

export const ADDRESS_RECORDS: Rec[] = [
  {
    ListingKey: 'A',
    UnparsedAddress: '1200 N Maple Street Unit 4B',
    StreetNumber: '1200',
    StreetDirPrefix: 'N',
    StreetName: 'Maple',
    StreetSuffix: 'Street',
    UnitNumber: '4B',
    City: 'Seattle',
    StateOrProvince: 'WA',
    PostalCode: '98103',
  },
  {
    ListingKey: 'B',
    UnparsedAddress: '45 Sunset Blvd',
    StreetNumber: '45',
    StreetName: 'Sunset',
    StreetSuffix: 'Blvd',
    City: 'Los Angeles',
    StateOrProvince: 'CA',
    PostalCode: '90026',
  },
  {
    ListingKey: 'C',
    UnparsedAddress: '77 Harbor Avenue',
    StreetNumber: '77',
    StreetName: 'Harbor',
    StreetSuffix: 'Avenue',
    City: 'Tampa',
    StateOrProvince: 'FL',
    PostalCode: '33602',
  },
  {
    ListingKey: 'D',
    UnparsedAddress: '9 Maplewood Ct',
    StreetNumber: '9',
    StreetName: 'Maplewood',
    StreetSuffix: 'Ct',
    City: 'Seattle',
    StateOrProvince: 'WA',
    PostalCode: '98115',
  },
  {
    ListingKey: 'E',
    UnparsedAddress: '300 S Main St',
    StreetNumber: '300',
    StreetDirPrefix: 'S',
    StreetName: 'Main',
    StreetSuffix: 'St',
    City: 'Phoenix',
    StateOrProvince: 'AZ',
    PostalCode: '85004',
  },
];

export const NAME_RECORDS: Rec[] = [
  { ListingKey: 'A', ListAgentFullName: 'José Núñez', ListOfficeName: "O'Brien & Sons Realty", BuyerAgentFirstName: 'Zoë', BuyerAgentLastName: "O'Brien" },
  { ListingKey: 'B', ListAgentFirstName: 'Renée', ListAgentLastName: 'Müller', CoListAgentFullName: 'Jose Smith', BuyerOfficeName: 'Müller Homes' },
  { ListingKey: 'C', ListAgentFullName: 'Mary Jones' },
];

/** Bad search.text calls: text, min_matches, the QueryError code. */
export const ERROR_CASES: Array<[string, number | undefined, string]> = [
  ['', undefined, 'EmptySearchQuery'],
  ['  ,.- ', undefined, 'EmptySearchQuery'],
  ['w1', 0, 'InvalidMinMatches'],
  ['w1', -2, 'InvalidMinMatches'],
  ['w1', 1.5, 'InvalidMinMatches'],
  [Array.from({ length: 33 }, (_, i) => `t${i}`).join(' '), undefined, 'TooManySearchTerms'],
];
