/**
 * A test-only loader for the search suites: creates the whole layout and writes what search.text
 * reads in PostgreSQL (ListingKey, each search field's `#tokens` and `#length`, `#terms`,
 * `#search`) for the live rows of an in-memory engine's Property table, tokenized exactly as the
 * in-memory index tokenizes them (searchTokenSources, then address normalization). The other
 * columns stay null: the search SQL does not read them.
 */
import type pg from 'pg';
import { createStatements, indexStatements, lengthColumn, tokensColumn, type Layout } from '../../src/pg/layout.js';
import { SEARCH_FIELDS } from '../../src/schema/search-fields.js';
import type { TableSchema } from '../../src/schema/table-schema.js';
import { RESOURCE_NAMES, type ResourceName } from '../../src/schema/types.js';
import { searchTokenSources } from '../../src/search/indexes.js';
import { normalizeAddressToken } from '../../src/search/tokenize.js';
import type { Table } from '../../src/store/table.js';

const BATCH = 2_000;

/** Creates the layout of `schemas` and loads the search columns of `rows` (live rows of `table`), then the statistics and indexes. */
export async function loadSearchTables(
  db: pg.ClientBase,
  layout: Layout,
  schemas: Readonly<Record<ResourceName, TableSchema>>,
  table: Table,
  rows: readonly number[],
): Promise<void> {
  for (const sql of createStatements(layout, schemas)) await db.query(sql);
  const sources = searchTokenSources(table);
  const columns = [`"ListingKey"`, ...SEARCH_FIELDS.flatMap((f) => [tokensColumn(f), lengthColumn(f)])];
  // jsonb_to_recordset cannot name '#' columns, so each field is read by position from a JSON array.
  const select = [`(r->>0)`, ...SEARCH_FIELDS.flatMap((_, i) => [`ARRAY(SELECT jsonb_array_elements_text(r->${i + 1}))`, `jsonb_array_length(r->${i + 1})`])];
  const insert = `INSERT INTO ${layout.table('Property')} (${columns.join(', ')}) SELECT ${select.join(', ')} FROM jsonb_array_elements($1::jsonb) AS r`;
  for (let start = 0; start < rows.length; start += BATCH) {
    const batch = rows.slice(start, start + BATCH).map((row) => [
      table.keyOf(row),
      ...SEARCH_FIELDS.map((f) => {
        const tokens: string[] = [];
        sources[f](row, tokens);
        return f === 'RawAddressSearchText' ? tokens.map(normalizeAddressToken) : tokens;
      }),
    ]);
    await db.query(insert, [JSON.stringify(batch)]);
  }
  for (const f of SEARCH_FIELDS) {
    const tokens = tokensColumn(f);
    await db.query(
      `INSERT INTO ${layout.terms} (field, term, df) SELECT $1, u.term, count(*) FROM ${layout.table('Property')} AS p, LATERAL (SELECT DISTINCT t AS term FROM unnest(p.${tokens}) AS t) AS u GROUP BY u.term`,
      [f],
    );
    await db.query(
      `INSERT INTO ${layout.search} (field, n, total_length) SELECT $1, count(*), coalesce(sum(${lengthColumn(f)}), 0) FROM ${layout.table('Property')}`,
      [f],
    );
  }
  for (const sql of indexStatements(layout, schemas)) await db.query(sql);
  await db.query(`ANALYZE ${layout.table('Property')}`);
  await db.query(`ANALYZE ${layout.terms}`);
}

/** The table schemas of every resource, as an engine's store holds them. */
export function schemasOf(tableOf: (r: ResourceName) => Table): Record<ResourceName, TableSchema> {
  return Object.fromEntries(RESOURCE_NAMES.map((r) => [r, tableOf(r).schema])) as Record<ResourceName, TableSchema>;
}
