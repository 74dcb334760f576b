/**
 * compact.js with its `compactTablesSteps` counted, for `vi.mock`: how many compactions ran on the
 * event loop (a worker thread imports the module itself). Imports nothing at run time, so a mock
 * factory can load it while compact.js is being mocked.
 */
import type * as CompactModule from '../../src/live/compact.js';

export function countedOnEventLoop(real: typeof CompactModule, counter: { compactions: number }): typeof CompactModule {
  return {
    ...real,
    compactTablesSteps: (...args) => {
      counter.compactions++;
      return real.compactTablesSteps(...args);
    },
  };
}
