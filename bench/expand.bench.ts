/**
 * $expand on a Property page of 200 listings: no expansion (the page alone), `$expand=Media` (every
 * Media record of each listing), `$expand=PreferredMedia` (at most two photos, found by reading two
 * columns), and the naive way to get PreferredMedia — expand all Media and pick the two photos
 * from the records — as its baseline. Pages: the first 200 listings by key, and 200 listings
 * ordered by ListPrice desc with a filter (the typical search-results page).
 */
import { loadedBenchEngine } from './data.js';
import { timeTasks, type BenchFile, type BenchRow } from './lib.js';

type Rec = Record<string, unknown>;

/** PreferredMedia computed from full Media records, as a client (or a naive engine) would. */
function pickPreferred(media: Rec[]): Rec[] {
  const photos = media.filter((m) => m.MediaCategory === null || m.MediaCategory === undefined || m.MediaCategory === 'Photo');
  const first = photos.find((m) => m.PreferredPhotoYN === true) ?? photos[0];
  return first === undefined ? [] : [first, ...photos.filter((m) => m !== first).slice(0, 1)];
}

const bench: BenchFile = {
  name: 'expand',
  async run(options) {
    const rows: BenchRow[] = [];
    for (const size of options.sizes) {
      // the result cache off: each task repeats one query, and the bench times building the page and its expansions
      const { engine, label } = await loadedBenchEngine(size, options.log, { resultCache: false });
      const pages: Array<[string, string]> = [
        ['first 200 by key', '$top=200'],
        ['200 Active by ListPrice desc', "$filter=StandardStatus eq 'Active'&$orderby=ListPrice desc&$top=200"],
      ];
      for (const [pageName, page] of pages) {
        const q = (expand: string): string => (expand ? `${page}&$expand=${expand}` : page);
        const media = engine.query('Property', q('Media')).value;
        const mediaRecords = media.reduce((n, r) => n + (r.Media as Rec[]).length, 0);
        const preferred = engine.query('Property', q('PreferredMedia')).value;
        const agrees = preferred.every((r, i) => JSON.stringify(r.PreferredMedia) === JSON.stringify(pickPreferred(media[i].Media as Rec[])));
        const [none, all, pref, naive] = await timeTasks(
          'expand',
          [
            [`${pageName} ${label}, no $expand`, () => engine.query('Property', q(''))],
            [`${pageName} ${label}, $expand=Media`, () => engine.query('Property', q('Media'))],
            [`${pageName} ${label}, $expand=PreferredMedia`, () => engine.query('Property', q('PreferredMedia'))],
            [
              `${pageName} ${label}, baseline: $expand=Media then pick 2 photos`,
              () => engine.query('Property', q('Media')).value.map((r) => pickPreferred(r.Media as Rec[])),
            ],
          ],
          options,
        );
        const base = none.medianMs ?? 0;
        rows.push(
          { ...none, metrics: { listings: media.length } },
          { ...all, metrics: { mediaRecords, expandMsPerListing: ((all.medianMs ?? 0) - base) / media.length } },
          {
            ...pref,
            metrics: { expandMsPerListing: ((pref.medianMs ?? 0) - base) / media.length, ratioMediaOverPreferred: (all.medianMs ?? 0) / (pref.medianMs ?? 1) },
            note: agrees ? 'same photos as picking from all Media records' : 'DIFFERS from picking from all Media records',
          },
          naive,
        );
      }
    }
    return rows;
  },
};

export default bench;
