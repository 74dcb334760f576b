/**
 * Where FlexSearch could serve text search: as the type-ahead (prefix) term dictionary of
 * RawAddressSearchText. Measures, on the address vocabulary of the 100k bench data set, build
 * time and prefix look-ups of FlexSearch (tokenize: 'forward', Exact encoder, each term a
 * document) against our sorted term list with binary search, and checks both return the same
 * terms. (FlexSearch has no Damerau one-edit matching and no BM25, so the fuzzy look-up and the
 * postings are ours regardless; DESIGN.md records the decision.)
 */
import { createReadStream } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import FlexSearch from 'flexsearch';
import { Lexicon } from '../src/search/lexicon.js';
import { buildFieldIndex } from '../src/search/postings.js';
import { searchTextsOf } from '../src/search/indexes.js';
import { benchDataset } from './data.js';
import { timeTasks, type BenchFile } from './lib.js';

const bench: BenchFile = {
  name: 'lexicon',
  async run(options) {
    const dir = benchDataset(100_000, options.log);
    const texts: string[] = [];
    const lines = createInterface({ input: createReadStream(path.join(dir, 'Property.jsonl')), crlfDelay: Infinity });
    for await (const line of lines) {
      const rec = JSON.parse(line) as Record<string, unknown>;
      texts.push(searchTextsOf('RawAddressSearchText', 0, (_, f) => rec[f], []).join(' '));
    }
    const index = buildFieldIndex(texts.length, (row, out) => out.push(texts[row]), { address: true });
    const terms = index.terms.list();
    options.log(`${terms.length} address terms`);

    let t = performance.now();
    const ours = new Lexicon({ terms, idOf: (term) => index.terms.id(term) });
    const oursBuildMs = performance.now() - t;
    t = performance.now();
    const flex = new FlexSearch.Index({ tokenize: 'forward', encoder: FlexSearch.Charset.Exact });
    terms.forEach((term, id) => flex.add(id, term));
    const flexBuildMs = performance.now() - t;

    const prefixes = ['ma', 'map', 'sea', 'wash', '12', '981', 'hawth', 'sun', 'nort', 'pa'];
    let same = true;
    for (const p of prefixes) {
      const a = ours.withPrefix(p, []).sort((x, y) => x - y);
      const b = (flex.search(p, { limit: terms.length }) as number[]).slice().sort((x, y) => x - y);
      if (JSON.stringify(a) !== JSON.stringify(b)) {
        same = false;
        options.log(`prefix '${p}': ours ${a.length} terms, flexsearch ${b.length}`);
      }
    }
    const rows = await timeTasks(
      'lexicon',
      [
        ['prefix look-ups x10: sorted terms + binary search', () => prefixes.map((p) => ours.withPrefix(p, []).length)],
        ['prefix look-ups x10: flexsearch forward index', () => prefixes.map((p) => (flex.search(p, { limit: terms.length }) as number[]).length)],
        ['one-edit look-ups x4: deletion index', () => ['mapel', 'washingtn', 'hawtorne', 'seatle'].map((w) => ours.withinOneEdit(w, []).length)],
      ],
      options,
    );
    return [
      {
        bench: 'lexicon',
        task: 'build over the address vocabulary',
        metrics: { terms: terms.length, oursBuildMs, flexBuildMs },
        note: same ? 'same prefix results' : 'prefix results DIFFER',
      },
      ...rows,
    ];
  },
};
export default bench;
