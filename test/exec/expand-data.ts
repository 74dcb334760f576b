/**
 * The hand-made record sets of the $expand tests (test/exec/expand.test.ts, and the PostgreSQL
 * backend's test/pg/expand.test.ts, which runs the same cases against both engines): listings and
 * Media for PreferredMedia's rules, and a small set with null order values, equal ones, time zones
 * and a listing of another source.
 */

type Rec = Record<string, unknown>;

export const listing = (key: string, source = 'A'): Rec => ({ ListingKey: key, OriginatingSystemName: source, ListPrice: 100 });
export const media = (listingKey: string, key: string, order: number | null, extra: Rec = {}): Rec => ({
  MediaKey: key,
  ResourceName: 'Property',
  ResourceRecordKey: listingKey,
  ...(order === null ? {} : { Order: order }),
  MediaCategory: 'Photo',
  ...extra,
});
export const keysOf = (rows: unknown): string[] => (rows as Rec[]).map((r) => (r.MediaKey ?? r.OpenHouseKey ?? r.PropertyChangeKey) as string);

/** PreferredMedia's cases: listings L1..L10 and their Media (see the comments). */
export function preferredMediaData(): { Property: Rec[]; Media: Rec[] } {
  const pref = { PreferredPhotoYN: true };
  return {
    Property: ['L1', 'L2', 'L3', 'L4', 'L5', 'L6', 'L7', 'L8', 'L9', 'L10'].map((k) => listing(k)),
    Media: [
      // L1: the preferred photo first, then the lowest Order
      media('L1', 'L1-c', 3, pref),
      media('L1', 'L1-a', 1),
      media('L1', 'L1-b', 2, { PreferredPhotoYN: false }),
      // L2: several preferred: the lowest Order among them, then the lowest Order overall
      media('L2', 'L2-e', 5, pref),
      media('L2', 'L2-b', 2, pref),
      media('L2', 'L2-a', 1),
      media('L2', 'L2-d', 4, pref),
      // L3: none preferred: the two lowest Orders
      media('L3', 'L3-x', 7),
      media('L3', 'L3-y', 2),
      media('L3', 'L3-z', 4),
      media('L3', 'L3-w', 9),
      // L4: non-photos skipped, even when marked preferred
      media('L4', 'L4-fp', 1, { MediaCategory: 'Floor Plan', PreferredPhotoYN: true }),
      media('L4', 'L4-v', 2, { MediaCategory: 'Video' }),
      media('L4', 'L4-p3', 3),
      media('L4', 'L4-p5', 5),
      media('L4', 'L4-p4', 4, pref),
      // L5: MediaCategory absent counts as a photo
      media('L5', 'L5-n', 1, { MediaCategory: undefined }),
      media('L5', 'L5-p', 2, pref),
      media('L5', 'L5-doc', 0, { MediaCategory: 'Document' }),
      // L6: equal Orders tie by MediaKey, also among several preferred
      media('L6', 'L6-b', 1, pref),
      media('L6', 'L6-a', 1, pref),
      media('L6', 'L6-d', 0),
      media('L6', 'L6-c', 0),
      // L7: one photo; L8: only non-photos; L9: none at all (no Media rows)
      media('L7', 'L7-only', 3, { PreferredPhotoYN: false }),
      media('L7', 'L7-doc', 1, { MediaCategory: 'Document' }),
      media('L8', 'L8-doc', 1, { MediaCategory: 'Document', PreferredPhotoYN: true }),
      // L10: a photo without Order sorts lowest (nulls lowest), after the preferred one
      media('L10', 'L10-p', 8, pref),
      media('L10', 'L10-o', 1),
      media('L10', 'L10-null', null),
      // not a Property medium: never an expansion of L1
      { ...media('L1', 'L1-member', 0, pref), ResourceName: 'Member' },
    ],
  };
}

/** Listings L1..L4 (L3 of source B) with Media, OpenHouse and PropertyChange rows: null order values, ties, time zones. */
export function handMadeData(): { Property: Rec[]; Media: Rec[]; OpenHouse: Rec[]; PropertyChange: Rec[] } {
  return {
    Property: [listing('L1'), listing('L2'), listing('L3', 'B'), listing('L4')],
    Media: [
      media('L1', 'M-c', 2, { ImageWidth: 800 }),
      media('L1', 'M-b', 2),
      media('L1', 'M-a', 3, { ImageWidth: 800 }),
      media('L1', 'M-d', 1, { ImageWidth: 640 }),
      media('L3', 'M-hidden', 1, { PreferredPhotoYN: true }),
      media('L4', 'M-l4', 1),
    ],
    OpenHouse: [
      { OpenHouseKey: 'O-3', ListingKey: 'L1', OpenHouseStartTime: '2025-06-07T10:00:00-07:00', OpenHouseRemarks: 'Cookies' },
      { OpenHouseKey: 'O-2', ListingKey: 'L1', OpenHouseStartTime: '2025-06-07T17:00:00Z' },
      { OpenHouseKey: 'O-1', ListingKey: 'L1', OpenHouseStartTime: '2025-06-07T12:00:00-05:00' },
      { OpenHouseKey: 'O-0', ListingKey: 'L1' },
      { OpenHouseKey: 'O-h', ListingKey: 'L3', OpenHouseStartTime: '2025-06-07T17:00:00Z' },
    ],
    PropertyChange: [
      { PropertyChangeKey: 'C-b', ListingKey: 'L1', FieldName: 'ListPrice', ModificationTimestamp: '2025-05-01T00:00:00Z' },
      { PropertyChangeKey: 'C-a', ListingKey: 'L1', FieldName: 'ListPrice', ModificationTimestamp: '2025-05-01T00:00:00Z' },
      { PropertyChangeKey: 'C-n', ListingKey: 'L1', FieldName: 'StandardStatus' },
      { PropertyChangeKey: 'C-z', ListingKey: 'L1', FieldName: 'StandardStatus', ModificationTimestamp: '2025-05-02T00:00:00Z' },
      { PropertyChangeKey: 'C-x', ListingKey: 'L2', FieldName: 'StandardStatus', ModificationTimestamp: '2025-04-02T00:00:00Z' },
    ],
  };
}
