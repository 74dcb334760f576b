// @ts-check
import { defineConfig, globalIgnores } from 'eslint/config';
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import prettier from 'eslint-config-prettier';

/** Files that import bench/package.json's dependencies (tsconfig.json excludes them too; bench/tsconfig.json has them). */
export const BENCH_PEER_FILES = [
  'bench/compare/peers/sqlite.ts',
  'bench/compare/peers/orama.ts',
  'bench/compare/peers/minisearch.ts',
  'bench/lexicon.bench.ts',
];

export default defineConfig(
  globalIgnores(['dist/', 'bench/results/', 'bench/.cache/', 'bench/node_modules/', '.tmp/', 'coverage/', 'fixtures/']),
  // The benchmark peers import bench/'s own dependencies (SQLite, Orama, MiniSearch, FlexSearch), which the root
  // `npm ci` does not install: `npm run bench:check` installs them and lints these files (with --no-ignore).
  globalIgnores(BENCH_PEER_FILES),
  js.configs.recommended,
  tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // Promise handling: on in recommendedTypeChecked already, listed so they stay on whatever the preset does.
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrorsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
      // Both `import type { A }` and `import { type A }` are used; either satisfies verbatimModuleSyntax, the fixer uses the inline form.
      '@typescript-eslint/consistent-type-imports': ['error', { prefer: 'type-imports', fixStyle: 'inline-type-imports' }],
      // Off in the preset too; kept off explicitly: `!` after a bounds or null check in hot loops (typed arrays, maps) is deliberate.
      '@typescript-eslint/no-non-null-assertion': 'off',
      // String() of JSON scalars typed unknown/JsonValue (record fields, token patterns) is routine here; all 15 findings were false positives.
      '@typescript-eslint/no-base-to-string': 'off',
    },
  },
  {
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      // Fakes (sleep, upstream fetch) and bench runners implement Promise-returning interfaces with `async` and no await.
      '@typescript-eslint/require-await': 'off',
    },
  },
  {
    files: ['test/**/*.ts'],
    rules: {
      // Tests read parsed JSON response bodies typed `any` on purpose (test/service/helpers.ts) and assert on them; every access would be flagged.
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
    },
  },
  {
    // Plain JS config files are outside tsconfig.json's project, so they are linted without type information.
    files: ['**/*.js', '**/*.cjs', '**/*.mjs'],
    extends: [tseslint.configs.disableTypeChecked],
  },
  {
    // The explorer page's modules (explorer/) run in a browser.
    files: ['explorer/**/*.js'],
    languageOptions: {
      globals: { document: 'readonly', location: 'readonly', fetch: 'readonly', DOMParser: 'readonly', URL: 'readonly', URLSearchParams: 'readonly' },
    },
  },
  {
    // typescript-eslint's base sets sourceType 'module' everywhere; .cjs files are CommonJS (module, require).
    files: ['**/*.cjs'],
    languageOptions: { sourceType: 'commonjs' },
  },
  prettier,
);
