/**
 * Worker threads on the engine's own modules, from the built JavaScript or, under tsx (tests,
 * benchmarks), from the TypeScript sources: there the worker registers tsx's loader before it
 * imports its module.
 */
import { Worker, type WorkerOptions } from 'node:worker_threads';

/**
 * Starts a worker on the module `name` (without extension) beside the module whose
 * `import.meta.url` is `from`, with the same extension. Throws as `new Worker` does when no thread
 * can be started.
 */
export function startWorker(from: string, name: string, options: WorkerOptions): Worker {
  if (from.endsWith('.ts')) {
    const target = new URL(`./${name}.ts`, from).href;
    const tsx = import.meta.resolve('tsx/esm/api');
    const boot = `import(${JSON.stringify(tsx)}).then((m) => { m.register(); return import(${JSON.stringify(target)}); });`;
    return new Worker(boot, { ...options, eval: true });
  }
  return new Worker(new URL(`./${name}.js`, from), options);
}
