/**
 * The six search fields of SERVICE.md §2 and the source fields that feed each, in order. A search
 * field's text is its sources' values joined in this order (collections element by element).
 * Agent fields fall back to FirstName + LastName where a FullName is absent.
 */
export const SEARCH_FIELDS = [
  'RawAddressSearchText',
  'KeywordSearchText',
  'ListAgentSearchText',
  'BuyerAgentSearchText',
  'ListOfficeSearchText',
  'BuyerOfficeSearchText',
] as const;

export type SearchFieldName = (typeof SEARCH_FIELDS)[number];

/** One source of a search field: a field, or a full-name field with its first/last fallback. */
export type SearchSource = string | { readonly fullName: string; readonly firstName: string; readonly lastName: string };

export const SEARCH_FIELD_SOURCES: Readonly<Record<SearchFieldName, readonly SearchSource[]>> = {
  RawAddressSearchText: [
    'UnparsedAddress',
    'StreetNumber',
    'StreetDirPrefix',
    'StreetName',
    'StreetSuffix',
    'StreetDirSuffix',
    'UnitNumber',
    'City',
    'StateOrProvince',
    'PostalCode',
  ],
  KeywordSearchText: [
    'ListingId',
    'Appliances',
    'ArchitecturalStyle',
    'Heating',
    'Cooling',
    'InteriorFeatures',
    'ParkingFeatures',
    'PropertySubType',
    'WaterfrontFeatures',
    'View',
    'PublicRemarks',
  ],
  ListAgentSearchText: [
    { fullName: 'ListAgentFullName', firstName: 'ListAgentFirstName', lastName: 'ListAgentLastName' },
    { fullName: 'CoListAgentFullName', firstName: 'CoListAgentFirstName', lastName: 'CoListAgentLastName' },
  ],
  BuyerAgentSearchText: [
    { fullName: 'BuyerAgentFullName', firstName: 'BuyerAgentFirstName', lastName: 'BuyerAgentLastName' },
    { fullName: 'CoBuyerAgentFullName', firstName: 'CoBuyerAgentFirstName', lastName: 'CoBuyerAgentLastName' },
  ],
  ListOfficeSearchText: ['ListOfficeName', 'CoListOfficeName'],
  BuyerOfficeSearchText: ['BuyerOfficeName', 'CoBuyerOfficeName'],
};

/** Every source field name a search field reads, for the schema's "feeds search field" attribute. */
export function sourceFieldsOf(field: SearchFieldName): string[] {
  return SEARCH_FIELD_SOURCES[field].flatMap((s) => (typeof s === 'string' ? [s] : [s.fullName, s.firstName, s.lastName]));
}

export function isSearchField(name: string): name is SearchFieldName {
  return (SEARCH_FIELDS as readonly string[]).includes(name);
}
