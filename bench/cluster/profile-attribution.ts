/**
 * Where a row's step goes, from one profiled launch of bench/cluster's fsdp-ts rows: rank 0's V8
 * CPU profile of its main thread (training-rank.ts's BENCH_CPU_PROFILE), cut into each row's
 * measured steps by the windows the rank recorded, and the per-thread CPU counters of
 * phase-profile.ts for the threads the profile does not see.
 *
 * [Note: profile attribution]
 * The main thread's samples (about one per millisecond of wall time, whether it runs or blocks)
 * fall into one category each, by their stack. A native leaf (a builtin such as postMessage, a
 * BLAS routine, Node's internals) counts where the nearest frame with a source file is:
 *   waiting      the stack is inside a collectives wait (Work.wait: Atomics.wait on the
 *                communication thread's status word): the step waits on the wire or on the
 *                communication thread's own CPU work
 *   gc           V8's "(garbage collector)"
 *   idle         V8's "(idle)": the event loop has nothing to run
 *   bfloat16     the bfloat16 conversion on the main thread (@fsdp-ts/kernels' encode/decode)
 *   optimizer    @fsdp-ts/optim (AdamW's kernel and its JavaScript)
 *   kernels      tfjs (core or the wasm backend), WebAssembly, and the kernels of nn and kernels
 *                (matMul through OpenBLAS, layer norm, GELU, column sums)
 *   fsdp         fsdp and flat-param: gathering into and out of flat buffers, writing gradients
 *   collectives  the main thread's side of the collectives: issuing ops to the communication
 *                thread (postMessage), its bookkeeping
 *   other        the rest: autograd and tensor bookkeeping (@fsdp-ts/tensor, nn's modules), V8
 *                "(program)", Node internals
 * Beside them, from the kernel's per-thread counters over the same steps: the communication
 * thread's CPU, every other thread's CPU (GC helpers, libuv), and the time the main thread was
 * runnable with no core free (`mainRunnableMs`: the cores, not the code, held it).
 * All in ms per measured step. The profiled launch runs after the measured ones and is not one of
 * them: sampling costs a few percent, so its step (`profiledStepMs`) is a little slower.
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

export const mainThreadCategories = [
  'kernels',
  'bfloat16',
  'optimizer',
  'fsdp',
  'collectives',
  'other',
  'gc',
  'waiting',
  'idle',
] as const;
export type MainThreadCategory = (typeof mainThreadCategories)[number];

export interface RowAttribution {
  /** The profiled launch's wall ms per measured step (all windows of this row). */
  profiledStepMs: number;
  /** The main thread's wall time per step by category ([Note: profile attribution]). */
  mainThreadMs: Record<MainThreadCategory, number>;
  communicationThreadCpuMs: number;
  otherThreadsCpuMs: number;
  mainRunnableMs: number;
  /** The largest self times of the main thread (outside waiting and idle), ms per step; a native one with its caller. */
  top: { name: string; category: MainThreadCategory; ms: number }[];
}

/** The category of a sample whose nearest frame with a source file is `node` (see the note). */
const categoryOfFrame = (node: ProfileNode): MainThreadCategory => {
  const { functionName, url } = node.callFrame;
  if (functionName === '(garbage collector)') return 'gc';
  if (functionName === '(idle)') return 'idle';
  if (/bfloat16/i.test(functionName) || /kernels\/(src|dist)\/reduce\/bfloat16/.test(url)) return 'bfloat16';
  if (/packages\/optim\//.test(url)) return 'optimizer';
  if (
    url.startsWith('wasm://') ||
    url.includes('@tensorflow/') ||
    /packages\/kernels\//.test(url) ||
    /packages\/nn\/(src|dist)\/internal\/.*kernel/.test(url)
  )
    return 'kernels';
  if (/packages\/(fsdp|flat-param)\/(src|dist)\//.test(url)) return 'fsdp';
  if (/packages\/collectives\//.test(url)) return 'collectives';
  return 'other';
};
/** A frame with a source file of its own (not a native builtin, not Node's internals). */
const hasSource = (node: ProfileNode) => node.callFrame.url !== '' && !node.callFrame.url.startsWith('node:');
const isWait = (node: ProfileNode) =>
  /packages\/collectives\/(src|dist)\//.test(node.callFrame.url) && /wait/i.test(node.callFrame.functionName);

const label = (node: ProfileNode) =>
  `${node.callFrame.functionName || '(anonymous)'} ${node.callFrame.url.replace(/^.*\/(node_modules|packages)\//, '')}${node.callFrame.url === '' ? '' : `:${node.callFrame.lineNumber + 1}`}`.trim();

/**
 * Attributes the samples of `profilePath` inside each row's windows. `rows[i].windows` are that
 * row's measured steps, `rows[i].phases` its phase-profile samples (communication, otherThreads,
 * mainRunnable per step).
 */
export function attributeProfile(
  profilePath: string,
  rows: readonly {
    windows: readonly (readonly [number, number])[];
    phases: { communication: number[]; otherThreads: number[]; mainRunnable: number[] };
  }[],
): RowAttribution[] {
  const profile = JSON.parse(readFileSync(profilePath, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const categoryOf = new Map<number, MainThreadCategory>();
  /** A native leaf's nearest frame with a source file (its caller, for the top list). */
  const callerOf = new Map<number, ProfileNode>();
  const category = (id: number): MainThreadCategory => {
    const known = categoryOf.get(id);
    if (known !== undefined) return known;
    let waiting = false;
    let sourceFrame: ProfileNode | undefined;
    for (let cursor: number | undefined = id; cursor !== undefined; cursor = parent.get(cursor)) {
      const node = byId.get(cursor)!;
      if (isWait(node)) waiting = true;
      if (sourceFrame === undefined && hasSource(node)) sourceFrame = node;
    }
    const leaf = byId.get(id)!;
    if (!hasSource(leaf) && sourceFrame !== undefined) callerOf.set(id, sourceFrame);
    const special = ['(garbage collector)', '(idle)', '(program)'].includes(leaf.callFrame.functionName);
    const result = waiting ? 'waiting' : categoryOfFrame(special ? leaf : (sourceFrame ?? leaf));
    categoryOf.set(id, result);
    return result;
  };
  // Every window of every row, sorted, so one pass over the samples finds each sample's window.
  const windows = rows
    .flatMap((row, index) => row.windows.map(([start, end]) => ({ start, end, index })))
    .sort((a, b) => a.start - b.start);
  const totals = rows.map(() => ({
    categories: Object.fromEntries(mainThreadCategories.map((name) => [name, 0])) as Record<
      MainThreadCategory,
      number
    >,
    self: new Map<number, number>(),
  }));
  let time = profile.startTime;
  let cursor = 0;
  profile.samples.forEach((id, sample) => {
    const delta = profile.timeDeltas[sample] ?? 0;
    time += delta;
    while (cursor < windows.length && windows[cursor]!.end < time) cursor++;
    const window = windows[cursor];
    if (window === undefined || time < window.start) return;
    const into = totals[window.index]!;
    const name = category(id);
    into.categories[name] += delta / 1000;
    if (name !== 'waiting' && name !== 'idle') into.self.set(id, (into.self.get(id) ?? 0) + delta / 1000);
  });
  const mean = (values: readonly number[]) =>
    values.length === 0 ? 0 : values.reduce((a, b) => a + b, 0) / values.length;
  return rows.map((row, index) => {
    const steps = Math.max(1, row.windows.length);
    const { categories, self } = totals[index]!;
    const byLabel = new Map<string, { category: MainThreadCategory; ms: number }>();
    for (const [id, ms] of self) {
      const caller = callerOf.get(id);
      const name = `${label(byId.get(id)!)}${caller === undefined ? '' : ` ← ${label(caller)}`}`;
      const entry = byLabel.get(name) ?? { category: category(id), ms: 0 };
      entry.ms += ms;
      byLabel.set(name, entry);
    }
    return {
      profiledStepMs: row.windows.reduce((sum, [start, end]) => sum + (end - start) / 1000, 0) / steps,
      mainThreadMs: Object.fromEntries(
        mainThreadCategories.map((name) => [name, categories[name] / steps]),
      ) as Record<MainThreadCategory, number>,
      communicationThreadCpuMs: mean(row.phases.communication),
      otherThreadsCpuMs: mean(row.phases.otherThreads),
      mainRunnableMs: mean(row.phases.mainRunnable),
      top: [...byLabel]
        .sort((a, b) => b[1].ms - a[1].ms)
        .slice(0, 5)
        .map(([name, entry]) => ({ name, category: entry.category, ms: entry.ms / steps })),
    };
  });
}

/** One line: the attribution as bench:report and the console show it. */
export function describeAttribution(attribution: RowAttribution): string {
  const main = mainThreadCategories
    .map((name) => `${name} ${attribution.mainThreadMs[name].toFixed(0)}`)
    .join(', ');
  return `main thread ${main}; communication thread CPU ${attribution.communicationThreadCpuMs.toFixed(0)}, other threads ${attribution.otherThreadsCpuMs.toFixed(0)}, no core ${attribution.mainRunnableMs.toFixed(0)} (ms/step of a profiled ${attribution.profiledStepMs.toFixed(0)} ms step)`;
}
