import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Tests never assert on timing; the generous timeout only guards against a hang.
    testTimeout: 60_000,
    pool: 'forks',
    // one throwaway PostgreSQL cluster for the run (skipped, saying why, without the binaries)
    globalSetup: ['test/pg/global-setup.ts'],
  },
});
