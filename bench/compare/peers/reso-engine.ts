/**
 * reso-engine itself, as a user embeds it: `Engine.open({ data })` loads the data set directory
 * (Property and its Media and OpenHouse children, every index built eagerly) and each family runs
 * as its OData query string through `engine.query` — parse, bind, plan and execute included, the
 * plan cache on (512 plans, as in the service). The result cache is off: a family repeats one
 * query, which the cache would answer without executing it, and the comparison measures execution
 * against the peers' (none of which keeps answers). The query returns full records (all 69 fields) where
 * the family has no $select, while the peers return keys; mapping records to keys is inside the
 * timed call, as every peer's own mapping is.
 *
 * RESO_COMPARE_PROPERTY_ONLY=1 opens a directory holding only Property.jsonl (a symbolic link), to
 * report the load time and memory without Media. RESO_COMPARE_SELECT_KEYS=1 adds
 * `$select=ListingKey` to the families that return records, so that reso-engine returns what the
 * peers return (keys), for a like-for-like comparison beside the issue's queries.
 */
import { mkdtempSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Engine } from '../../../src/engine.js';
import type { Answer, Families, FamilyId, FamilyParams } from '../families.js';
import type { Peer } from '../peer.js';

/** The families' reference instant (DaysOnMarket is not used by any family, but fix it anyway). */
const NOW = new Date('2025-06-01T00:00:00Z');

class ResoEnginePeer implements Peer {
  readonly name: string;
  readonly loads: string;
  private engine!: Engine;

  constructor(
    private readonly propertyOnly: boolean,
    private readonly selectKeys: boolean,
  ) {
    this.name = propertyOnly ? 'reso-engine (Property only)' : selectKeys ? 'reso-engine ($select=ListingKey)' : 'reso-engine';
    this.loads = propertyOnly ? 'Property only, all indexes' : 'Property + Media + OpenHouse, all indexes';
  }

  async load(dir: string): Promise<void> {
    let data = dir;
    if (this.propertyOnly) {
      data = mkdtempSync(path.join(os.tmpdir(), 'reso-compare-'));
      symlinkSync(path.resolve(dir, 'Property.jsonl'), path.join(data, 'Property.jsonl'));
    }
    this.engine = await Engine.open({ data, now: () => NOW, resultCache: false });
  }

  prepare<F extends FamilyId>(family: F, _params: FamilyParams[F], families: Families): () => Answer {
    const engine = this.engine;
    const q = this.queryOf(families, family);
    if (family === 'Q5') return () => ({ kind: 'groups', groups: engine.query('Property', q).value as never });
    if (family === 'Q9') return () => ({ kind: 'count', count: engine.query('Property', q)['@odata.count']! });
    return () => ({ kind: 'keys', keys: engine.query('Property', q).value.map((r) => r.ListingKey as string) });
  }

  private queryOf(families: Families, family: FamilyId): string {
    const q = families.odata[family];
    return this.selectKeys && !/\$select|\$apply|\$top=0/.test(q) ? `${q}&$select=ListingKey` : q;
  }

  /** The plan each family runs, for the report. */
  explain(families: Families, family: FamilyId): string {
    return this.engine
      .explain('Property', this.queryOf(families, family))
      .split('\n')
      .filter((l) => /candidates|order/.test(l))
      .join('; ');
  }
}

export default (): Peer => new ResoEnginePeer(process.env.RESO_COMPARE_PROPERTY_ONLY === '1', process.env.RESO_COMPARE_SELECT_KEYS === '1');
