/**
 * Work done in steps: a generator that yields between bounded pieces of work (building an index,
 * compacting, carrying structures over), run either to the end at once or with the event loop
 * given a turn between steps so that queries keep being answered (DESIGN.md, "Change").
 */

/** A piece of work in steps, returning T when done. */
export type Steps<T> = Generator<void, T, void>;

/** Gives the event loop a turn (queries waiting run on the published generation). */
export const yieldToLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Runs every step at once and returns the result. */
export function runNow<T>(steps: Steps<T>): T {
  for (;;) {
    const next = steps.next();
    if (next.done) return next.value;
  }
}

/** Runs the steps with the event loop given a turn after each one, and returns the result. */
export async function runYielding<T>(steps: Steps<T>): Promise<T> {
  for (;;) {
    const next = steps.next();
    if (next.done) return next.value;
    await yieldToLoop();
  }
}

/** A list of step functions as steps (each one a step). */
export function* eachStep(steps: Iterable<() => void>): Steps<void> {
  for (const step of steps) {
    step();
    yield;
  }
}
