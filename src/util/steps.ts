/**
 * Work done in steps: a generator that yields at check points between small pieces of work
 * (building an index, compacting, carrying structures over), run either to the end at once or
 * with the event loop given a turn whenever the work since the last turn has used its time budget
 * (a Pacer), so that queries keep being answered (DESIGN.md, "Change").
 */

/** A piece of work in steps, returning T when done. Each `yield` is a check point, not necessarily a turn. */
export type Steps<T> = Generator<void, T, void>;

/**
 * How long (ms) work in steps runs before it gives the event loop a turn: a query due meanwhile
 * waits about this long. Work checks the clock every few rows (or every few thousand elements
 * copied), so a step overruns it by one such piece at most. 1 ms until the pieces that could
 * not be cut shorter were split, then 0.1 ms; at 0.025 ms a turn costs about the same in all
 * (turns are cheap next to the work) and fewer queries wait behind a step (DESIGN.md, "Change").
 */
export const STEP_BUDGET_MS = 0.025;

let currentBudgetMs = STEP_BUDGET_MS;

/**
 * Sets the time budget of the pacers made from now on and returns the one before: 0 gives the
 * loop a turn at every check point (tests use it to interleave queries at every point a change
 * can be interrupted), Infinity never.
 */
export function setStepBudgetMs(ms: number): number {
  const was = currentBudgetMs;
  currentBudgetMs = ms;
  return was;
}

/** Gives the event loop a turn (queries waiting run on the published generation). */
export const yieldToLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** When a piece of work in steps gives the event loop a turn: once it has run its budget since the last one. */
export class Pacer {
  private since = performance.now();
  /** Turns given so far. */
  turns = 0;

  constructor(readonly budgetMs: number = currentBudgetMs) {}

  /** Whether the work since the last turn has used the budget (check, then `await turn()`). */
  due(): boolean {
    return performance.now() - this.since >= this.budgetMs;
  }

  /** Gives the event loop a turn and starts a new budget. */
  async turn(): Promise<void> {
    await yieldToLoop();
    this.resumed();
  }

  /** Counts a turn given and starts a new budget (the work resumes). */
  resumed(): void {
    this.turns++;
    this.since = performance.now();
  }

  /** A check point: a turn when the budget is used. */
  async check(): Promise<void> {
    if (this.due()) await this.turn();
  }

  /** Milliseconds since the last turn. */
  get elapsed(): number {
    return performance.now() - this.since;
  }
}

/** Runs every step at once and returns the result. */
export function runNow<T>(steps: Steps<T>): T {
  for (;;) {
    const next = steps.next();
    if (next.done) return next.value;
  }
}

/**
 * Runs the steps, giving the event loop a turn at the check points where the pacer's budget is
 * used, and returns the result. The steps up to the first turn run at once, in the caller's turn;
 * each turn is one `setImmediate` of the same callback, with no promise per turn (a change gives
 * about a thousand: awaiting each made half a kilobyte of garbage, BENCHMARKS.md "Live: a change's
 * garbage").
 */
export function runYielding<T>(steps: Steps<T>, pacer: Pacer = new Pacer()): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const run = (): void => {
      try {
        for (;;) {
          const next = steps.next();
          if (next.done) return resolve(next.value);
          if (pacer.due()) {
            setImmediate(resume);
            return;
          }
        }
      } catch (e) {
        // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- what the steps threw, as an async function would reject with it
        reject(e);
      }
    };
    const resume = (): void => {
      pacer.resumed();
      run();
    };
    run();
  });
}

/** A list of step functions as steps (a check point after each). */
export function* eachStep(steps: Iterable<() => void>): Steps<void> {
  for (const step of steps) {
    step();
    yield;
  }
}
