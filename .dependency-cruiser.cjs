// @ts-check
/**
 * Layering of src/: a layer may import only from itself and from the layers listed BEFORE it here
 * (the bottom first). Folders end in '/', root files are named with their '.ts'. index.ts is the
 * top (the public entry point) and may import anything, so it has no rule of its own.
 */
const LAYERS = [
  'util/',
  'errors.ts',
  'generate/',
  'odata/',
  'schema/',
  'store/',
  'search/',
  'geo/',
  'access/',
  'plan/',
  'exec/',
  'live/',
  'snapshot/',
  'engine-options.ts',
  'pg/',
  'engine.ts',
  'replicate/',
  'service/',
  'harness/',
  'adapters/',
  'index.ts',
];

const escapeRegExp = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
/** A path pattern for one layer: the folder's files, or exactly the root file. */
const pathOf = (layer) => (layer.endsWith('/') ? `^src/${escapeRegExp(layer)}` : `^src/${escapeRegExp(layer)}$`);

/** One rule per layer below the top: nothing it imports may come from a layer above it. */
const layerRules = LAYERS.slice(0, -1).map((layer, i) => ({
  name: `layer-${layer.replace(/\/$/, '').replace(/\.ts$/, '')}`,
  comment: `src/${layer} may import only from itself and the layers below it (${LAYERS.slice(0, i).join(', ') || 'none'}), not from ${LAYERS.slice(i + 1).join(', ')}.`,
  severity: 'error',
  from: { path: pathOf(layer) },
  to: { path: LAYERS.slice(i + 1).map(pathOf) },
}));

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'A cycle between modules: the layering can not hold and load order becomes fragile.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    ...layerRules,
    {
      name: 'append-parts-internal',
      comment: 'The column parts are internals of the table appender (src/store/append/).',
      severity: 'error',
      from: { pathNot: '^src/store/append/' },
      to: { path: '^src/store/append/parts/' },
    },
    {
      name: 'exec-operators-internal',
      comment: 'Outside src/exec/, plans run through execute.ts (and its statistics and envelope types); the operators are its internals.',
      severity: 'error',
      from: { pathNot: '^src/exec/' },
      to: { path: '^src/exec/', pathNot: '^src/exec/(execute|statistics|page)[.]ts$' },
    },
    {
      name: 'not-to-unresolvable',
      comment: 'An import that does not resolve to a file or an installed package.',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
    {
      name: 'src-not-to-test-or-bench',
      comment: 'The library must not depend on its tests or benchmarks.',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^(test|bench)/' },
    },
    {
      name: 'not-to-dev-dep',
      comment: 'src/ is shipped: a package it imports at run time must be in dependencies, not devDependencies.',
      severity: 'error',
      from: { path: '^src/' },
      to: { dependencyTypes: ['npm-dev'], dependencyTypesNot: ['type-only'], pathNot: ['node_modules/@types/'] },
    },
  ],
  options: {
    doNotFollow: { path: ['node_modules'] },
    exclude: { path: ['^dist/'] },
    // type-only imports count too: a type from a higher layer is still a dependency on it
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      mainFields: ['module', 'main', 'types', 'typings'],
    },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
