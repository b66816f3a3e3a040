/**
 * The CPU time of one training step by phase and by thread, from Linux's per-thread
 * scheduler counters (/proc/self/task/<tid>/schedstat: nanoseconds on a CPU, nanoseconds runnable
 * but waiting for one). Nothing is sampled: each phase boundary reads the main thread's two
 * counters (~20 µs), and each step's end reads every thread's.
 *
 * [Note: phase profile]
 * - forward, backward, optimizer, zeroGrad: the main thread's on-CPU ms inside each phase.
 *   backward includes writing each gradient into the flat gradient buffers and issuing the
 *   reductions; a blocking wait (Atomics.wait) costs no CPU, so waiting is its own column:
 * - waiting: wall ms the main thread blocked on its peer: on gradient reductions (the wrapper's
 *   statistics), or for 'two-singles' at the step's closing barrier (the slower rank's lead);
 * - mainRunnable: ms the main thread was ready to run but had no core (another thread or process had it);
 * - communication: on-CPU ms of the threads initProcessGroup started (the communication worker);
 * - otherThreads: on-CPU ms of every other thread (V8's garbage collector and compiler helpers, libuv);
 * - wall: the step's wall ms.
 * Linux only; elsewhere every column reads 0.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';

export const phaseNames = [
  'forward',
  'backward',
  'waiting',
  'optimizer',
  'zeroGrad',
  'mainRunnable',
  'communication',
  'otherThreads',
  'wall',
] as const;
export type PhaseName = (typeof phaseNames)[number];
/** Per phase, one value per measured step (ms). */
export type PhaseSamples = Record<PhaseName, number[]>;

const available = existsSync('/proc/self/task');
const mainThread = String(process.pid);

/** [on-CPU ns, runnable-waiting ns] of one thread; [0, 0] once it has ended. */
function threadCounters(tid: string): [number, number] {
  if (!available) return [0, 0];
  try {
    const [onCpu, waiting] = readFileSync(`/proc/self/task/${tid}/schedstat`, 'utf8').split(' ');
    return [Number(onCpu), Number(waiting)];
  } catch {
    return [0, 0];
  }
}

function threadIds(): string[] {
  return available ? readdirSync('/proc/self/task') : [];
}

/** The threads that appear while `start` runs (for initProcessGroup: its communication worker). */
export async function threadsStartedBy<T>(
  start: () => Promise<T>,
): Promise<{ value: T; threads: Set<string> }> {
  const before = new Set(threadIds());
  const value = await start();
  return { value, threads: new Set(threadIds().filter((tid) => !before.has(tid))) };
}

export class PhaseProfile {
  readonly enabled: boolean;
  readonly #communicationThreads: ReadonlySet<string>;
  readonly samples: PhaseSamples = Object.fromEntries(
    phaseNames.map((name) => [name, []]),
  ) as unknown as PhaseSamples;
  #current = new Map<PhaseName, number>();
  #lastOnCpu = 0;
  #mainStartWaiting = 0;
  #threadStart = new Map<string, number>();
  #stepStart = 0;

  constructor(enabled: boolean, communicationThreads: ReadonlySet<string>) {
    this.enabled = enabled && available;
    this.#communicationThreads = communicationThreads;
  }

  /** The step starts (after its start barrier). */
  begin(): void {
    if (!this.enabled) return;
    this.#current = new Map();
    this.#threadStart = new Map(threadIds().map((tid) => [tid, threadCounters(tid)[0]]));
    const [onCpu, waiting] = threadCounters(mainThread);
    this.#lastOnCpu = onCpu;
    this.#mainStartWaiting = waiting;
    this.#stepStart = performance.now();
  }

  /** The phase that just ended: the main thread's on-CPU time since the last mark is charged to it. */
  mark(phase: PhaseName): void {
    if (!this.enabled) return;
    const [onCpu] = threadCounters(mainThread);
    this.#add(phase, (onCpu - this.#lastOnCpu) / 1e6);
    this.#lastOnCpu = onCpu;
  }

  /** Adds a value measured elsewhere (the reduction wait). */
  add(phase: PhaseName, ms: number): void {
    if (this.enabled) this.#add(phase, ms);
  }

  /** The step ended; `keep`: a measured step (warm-up steps are dropped). */
  end(keep: boolean): void {
    if (!this.enabled) return;
    const wall = performance.now() - this.#stepStart;
    const [, waiting] = threadCounters(mainThread);
    this.#add('mainRunnable', (waiting - this.#mainStartWaiting) / 1e6);
    for (const tid of threadIds()) {
      if (tid === mainThread) continue;
      const used = (threadCounters(tid)[0] - (this.#threadStart.get(tid) ?? 0)) / 1e6;
      this.#add(this.#communicationThreads.has(tid) ? 'communication' : 'otherThreads', used);
    }
    this.#add('wall', wall);
    if (!keep) return;
    for (const name of phaseNames) this.samples[name].push(this.#current.get(name) ?? 0);
  }

  #add(phase: PhaseName, ms: number): void {
    this.#current.set(phase, (this.#current.get(phase) ?? 0) + ms);
  }
}
