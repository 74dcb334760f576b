/**
 * A trailing `Key asc` in $orderby repeats the tie-break every order ends with, so it must not
 * change the plan: `$orderby=T asc,Key asc&$top=N` (how keyset-paging clients, replication among
 * them, write their pages) is an ordered walk like `$orderby=T asc`, and `$orderby=Key asc` is
 * the default key order. The rows are those of the heap that $count=true forces (or of no $orderby).
 */
import { describe, expect, it } from 'vitest';
import type { QueryResource } from '../../src/engine.js';
import { defaultEngine } from '../service/helpers.js';

const CASES: ReadonlyArray<[QueryResource, string, string]> = [
  [
    'Media',
    "$filter=ModificationTimestamp ge 2024-06-01T00:00:00Z and (ModificationTimestamp gt 2024-06-01T00:00:00Z or MediaKey gt 'P000000500')&$orderby=ModificationTimestamp asc,MediaKey asc&$top=300",
    'ordered walk of ModificationTimestamp asc',
  ],
  ['Property', '$orderby=ListPrice desc,ListingKey asc&$top=120', 'ordered walk of ListPrice desc'],
  ['Property', "$filter=ListingKey gt 'P000001000'&$select=ListingKey&$orderby=ListingKey asc&$top=50", 'key ascending'],
  ['OpenHouse', '$orderby=ModificationTimestamp asc,OpenHouseKey asc&$top=40&$skip=20', 'ordered walk of ModificationTimestamp asc'],
];

describe('a trailing key asc in $orderby', () => {
  it.each(CASES)('%s %s: same plan as without it, same rows', async (resource, query, plan) => {
    const engine = await defaultEngine();
    expect(engine.explain(resource, query)).toContain(`order: ${plan}`);
    // the reference: a heap ($count=true rules out a walk), or no $orderby at all (the key order)
    const reference = plan.startsWith('ordered walk') ? `${query}&$count=true` : query.replace(/&\$orderby=[^&]*/, '');
    expect(engine.explain(resource, reference)).toContain(plan.startsWith('ordered walk') ? 'order: all matches, then top-k heap' : `order: ${plan}`);
    const got = engine.query(resource, query, { sources: ['CRMLS', 'HAR'] });
    expect(got.value.length).toBeGreaterThan(0);
    expect(got.value).toEqual(engine.query(resource, reference, { sources: ['CRMLS', 'HAR'] }).value);
  });

  it('still sorts by the key when it is descending or not last', async () => {
    const engine = await defaultEngine();
    expect(engine.explain('Property', '$orderby=ListPrice asc,ListingKey desc&$top=10')).toContain('top-k heap');
    expect(engine.explain('Property', '$orderby=ListingKey asc,ListPrice asc&$top=10')).toContain('top-k heap');
  });
});
