/**
 * One rank of a `npm run bench:scale` run (started by scale-bench.ts, through fsdp-run unless the
 * run is 'single'). Builds a GPT of the requested shape, wraps it, trains warm-up + measured steps
 * of AdamW at batch 1 × seqLen, times every phase, optionally saves and loads a checkpoint, and
 * writes its figures to `<output>.rank<R>.json`.
 */
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { initProcessGroup, type ProcessGroup } from '@fsdp-ts/collectives';
import { FullyShardedDataParallel, loadCheckpoint, saveCheckpoint } from '@fsdp-ts/fsdp';
import { backward, crossEntropy, deferredInit, GPT, type Module, TransformerBlock } from '@fsdp-ts/nn';
import { AdamW } from '@fsdp-ts/optim';
import { initBackend, Storage, storagePool } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import { timeSequentialWrite, timeUncachedRead } from './disk-rate';
import type { ScaleRankResult, ScaleRunRequest } from './scale-config';

const scriptStartMs = Date.now();
const request = JSON.parse(process.argv[2]!) as ScaleRunRequest;
let peakRss = 0;
/** Bytes of tfjs's wasm heap (it grows and never shrinks); 0 on another backend. */
const wasmHeapBytes = (): number =>
  (tf.backend() as unknown as { wasm?: { HEAPU8: Uint8Array } }).wasm?.HEAPU8.byteLength ?? 0;
/** Bytes of the units' allocated buffers, sharded and unsharded (once the model is wrapped). */
const unitBytes = (): number => {
  try {
    if (!(model instanceof FullyShardedDataParallel)) return 0;
    return model.units.reduce(
      (sum, unit) => sum + unit.handles.reduce((bytes, handle) => bytes + handle.allocatedBytes, 0),
      0,
    );
  } catch {
    return 0; // while the model is being built and wrapped (`model` is not assigned yet)
  }
};

/**
 * Probe (BENCH_SCALE_MAPPINGS=1, printed at each phase): the V8 heap and the mappings of
 * /proc/self/smaps holding the most resident memory, to tell what RSS holds besides array buffers.
 */
function largestMappings(): string {
  const mappings: { name: string; sizeKiB: number; rssKiB: number }[] = [];
  let current: { name: string; sizeKiB: number; rssKiB: number } | null = null;
  for (const line of readFileSync('/proc/self/smaps', 'utf8').split('\n')) {
    const header = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (header !== null) {
      current = {
        name: header[3] || '[anonymous]',
        sizeKiB: (Number.parseInt(header[2]!, 16) - Number.parseInt(header[1]!, 16)) / 1024,
        rssKiB: 0,
      };
      mappings.push(current);
    } else if (current !== null && line.startsWith('Rss:')) current.rssKiB = Number(line.split(/\s+/)[1]);
  }
  mappings.sort((a, b) => b.rssKiB - a.rssKiB);
  const { heapUsed, heapTotal, external, arrayBuffers } = process.memoryUsage();
  const MiB = (bytes: number) => (bytes / 2 ** 20).toFixed(0);
  const top = mappings
    .slice(0, 12)
    .map((mapping) => `${MiB(mapping.rssKiB * 1024)}/${MiB(mapping.sizeKiB * 1024)} ${mapping.name}`)
    .join('; ');
  const small = mappings
    .filter((mapping) => mapping.sizeKiB < 64 * 1024)
    .reduce((sum, mapping) => sum + mapping.rssKiB, 0);
  return `[scale] rank ${process.env.RANK ?? 0} mappings (MiB resident/size): V8 heap ${MiB(heapUsed)} used of ${MiB(heapTotal)}, external ${MiB(external)}, array buffers ${MiB(arrayBuffers)}; in mappings under 64 MiB ${MiB(small * 1024)}; largest: ${top}\n`;
}

/** Probe (with BENCH_SCALE_MAPPINGS=1): the units holding more than their shards, and how much. */
function gatheredUnits(): string {
  let units: FullyShardedDataParallel['units'];
  try {
    if (!(model instanceof FullyShardedDataParallel)) return '';
    units = model.units;
  } catch {
    return ''; // while the model is being built and wrapped (`model` is not assigned yet)
  }
  const held = units.flatMap((unit, index) => {
    const extra = unit.handles.reduce(
      (bytes, handle) => bytes + handle.allocatedBytes - 2 * handle.layout.shardNumel * 4,
      0,
    );
    return extra > 0 ? [`unit ${index} +${(extra / 2 ** 20).toFixed(0)} MiB`] : [];
  });
  return `[scale] rank ${process.env.RANK ?? 0} units holding more than their shards: ${held.join(', ') || 'none'}\n`;
}

/** RSS at the end of each phase, to see where the peak comes from. */
const phaseRss: Record<string, number> = {};
let loggedRss = 0;
// BENCH_SCALE_TRACE_GROWTH=n: a stack trace where the array buffers grew by more than n MiB since the last one (1: 150).
let tracedArrayBuffers = 0;
const traceGrowthMiB = Number(process.env.BENCH_SCALE_TRACE_GROWTH ?? 0);
const traceGrowthBytes = (traceGrowthMiB === 1 ? 150 : traceGrowthMiB) * 1024 ** 2;
const sampleRss = (phase?: string) => {
  const rss = process.memoryUsage().rss;
  peakRss = Math.max(peakRss, rss);
  // Between phases, a line each time RSS has grown by 128 MiB (where a capped rank runs out).
  if (phase === undefined && rss > loggedRss + 128 * 1024 ** 2) {
    loggedRss = rss;
    const { arrayBuffers } = process.memoryUsage();
    if (traceGrowthBytes > 0 && arrayBuffers > tracedArrayBuffers + traceGrowthBytes) {
      if (tracedArrayBuffers > 0)
        process.stderr.write(
          `[scale] array buffers grew to ${(arrayBuffers / 1024 ** 3).toFixed(2)} GiB at ${new Error().stack}\n`,
        );
      tracedArrayBuffers = arrayBuffers;
    }
    process.stderr.write(
      `[scale] rank ${process.env.RANK ?? 0} growing: RSS ${(rss / 1024 ** 3).toFixed(2)} GiB (array buffers ${(arrayBuffers / 1024 ** 3).toFixed(2)}, wasm heap ${(wasmHeapBytes() / 1024 ** 3).toFixed(2)}, pooled ${(storagePool.pooledBytes / 1024 ** 3).toFixed(2)}, unit buffers ${(unitBytes() / 1024 ** 3).toFixed(2)})\n`,
    );
  }
  if (phase === undefined) return;
  loggedRss = Math.max(loggedRss, rss);
  phaseRss[phase] = Math.max(phaseRss[phase] ?? 0, rss);
  // One line per phase on stderr: a rank stopped by its cap has told how far it got.
  const external = process.memoryUsage().arrayBuffers;
  if (process.env.BENCH_SCALE_MAPPINGS === '1') process.stderr.write(largestMappings() + gatheredUnits());
  process.stderr.write(
    `[scale] rank ${process.env.RANK ?? 0} ${phase}: RSS ${(rss / 1024 ** 3).toFixed(2)} GiB (peak ${(peakRss / 1024 ** 3).toFixed(2)}, array buffers ${(external / 1024 ** 3).toFixed(2)})\n`,
  );
};
// Probe (BENCH_SCALE_GC_EVERY_MIB=n): a full garbage collection each time n MiB of storages were
// freed, to tell memory that is garbage not yet collected from memory in use.
const collectEvery = Number(process.env.BENCH_SCALE_GC_EVERY_MIB ?? 0) * 1024 ** 2;
if (collectEvery > 0) {
  setFlagsFromString('--expose-gc');
  const collect = runInNewContext('gc') as () => void;
  let freedSinceCollection = 0;
  const free = Storage.prototype.free;
  Storage.prototype.free = function (this: Storage) {
    if (this.isAllocated) freedSinceCollection += this.byteLength;
    free.call(this);
    if (freedSinceCollection >= collectEvery) {
      freedSinceCollection = 0;
      collect();
    }
  };
}
// The peaks come right after allocations (a gathered unit, a gradient buffer): sample there too.
const allocate = Storage.prototype.allocate;
Storage.prototype.allocate = function (this: Storage) {
  allocate.call(this);
  sampleRss();
};

await initBackend('wasm');
sampleRss('runtime');
const runtimeRssBytes = process.memoryUsage().rss;
const group: ProcessGroup | null = request.strategy === 'single' ? null : await initProcessGroup();
const rank = group?.rank ?? 0;

let started = performance.now();
// Deferred: no values yet; FSDP makes each rank's shards while wrapping (nn's [Note: deferred
// initialisation]). A single process has to build the whole model.
const deferred = request.deferred && group !== null;
const inner = deferred ? deferredInit(() => new GPT(request.config)) : new GPT(request.config);
const initMs = performance.now() - started;
const parameterCount = inner.parameters().reduce((sum, parameter) => sum + parameter.numel, 0);
sampleRss('built');
started = performance.now();
const model: Module & { forward(tokens: tf.Tensor): tf.Tensor } =
  group === null
    ? inner
    : new FullyShardedDataParallel(inner, {
        group,
        shardingStrategy: request.strategy === 'single' ? 'no-shard' : request.strategy,
        autoWrapPolicy: [TransformerBlock],
        activationCheckpointing: request.activationCheckpointing,
        ...(request.backwardPrefetch === undefined ? {} : { backwardPrefetch: request.backwardPrefetch }),
        ...(request.forwardPrefetch === undefined ? {} : { forwardPrefetch: request.forwardPrefetch }),
        ...(request.offload === undefined ? {} : { offload: request.offload }),
      });
const wrapMs = performance.now() - started;
sampleRss('wrapped');
const estimateBytes = model instanceof FullyShardedDataParallel ? model.memoryEstimate.totalBytes : undefined;
const optimizer = new AdamW(model.parameters(), { lr: 1e-4 });
if (request.offload !== undefined && model instanceof FullyShardedDataParallel)
  model.offloadOptimizerState(optimizer);

/** This process's bytes read from and written to storage so far (/proc/self/io; every thread). */
function storageIo(): { read: number; written: number } {
  const text = readFileSync('/proc/self/io', 'utf8');
  const field = (name: string) => Number(new RegExp(`^${name}: (\\d+)`, 'm').exec(text)?.[1] ?? Number.NaN);
  return { read: field('read_bytes'), written: field('write_bytes') };
}

/** Every rank at once, between barriers: the time of `work` on the slowest rank. */
function concurrently(work: () => void): number {
  group!.barrier().wait();
  const started = performance.now();
  work();
  group!.barrier().wait();
  return performance.now() - started;
}

/** The disk as the offload sees it (disk-rate.ts): every rank writing, then reading back uncached. */
let diskProbe: ScaleRankResult['diskProbe'];
function probeDisk(): void {
  if (request.diskProbe === undefined || group === null) return;
  const { bytes, directory } = request.diskProbe;
  mkdirSync(directory, { recursive: true });
  const file = join(directory, `disk-probe-rank${rank}.bin`);
  diskProbe ??= { bytes, writeMs: [], readMs: [] };
  diskProbe.writeMs.push(concurrently(() => timeSequentialWrite(file, bytes, true)));
  diskProbe.readMs.push(concurrently(() => timeUncachedRead(file)));
}

const tokenValues = Int32Array.from(
  { length: request.batch * request.seqLen },
  (_, index) => (index * 7919 + rank * 31) % request.config.vocabSize,
);
const tokens = tf.tensor(tokenValues, [request.batch, request.seqLen], 'int32');
const targets = tf.tensor(
  tokenValues.map((value) => (value + 1) % request.config.vocabSize),
  [request.batch, request.seqLen],
  'int32',
);

/** Bytes of this rank's checkpoint data file: each flat shard, then one segment per AdamW buffer. */
function checkpointFileBytes(wrapped: FullyShardedDataParallel): number {
  const shardBytes = wrapped.units
    .flatMap((unit) => unit.handles)
    .reduce((sum, handle) => sum + handle.layout.shardNumel * 4, 0);
  return shardBytes * 3;
}

/** Bytes of every distinct allocated storage in `storages`. */
function storageBytes(storages: Iterable<Storage>): number {
  let total = 0;
  for (const storage of new Set(storages)) if (storage.isAllocated) total += storage.byteLength;
  return total;
}

function typedArrayBytes(value: unknown, seen = new Set<unknown>()): number {
  if (ArrayBuffer.isView(value)) return value.byteLength;
  if (value === null || typeof value !== 'object' || seen.has(value)) return 0;
  seen.add(value);
  const entries =
    value instanceof Map ? [...value.values()] : Object.values(value as Record<string, unknown>);
  return entries.reduce((sum: number, entry) => sum + typedArrayBytes(entry, seen), 0);
}

/** What this rank holds for training, outside forward and backward (see trainingStateBytes). */
function measureTrainingState(): ScaleRankResult['trainingStateBytes'] {
  const parameters = model.parameters();
  return {
    parameters: storageBytes(parameters.map((parameter) => parameter.data.storage)),
    gradients: storageBytes(
      parameters.flatMap((parameter) => (parameter.grad === null ? [] : [parameter.grad.storage])),
    ),
    // The optimizer's own per-parameter state (protected: read here for the figure only).
    optimizer: typedArrayBytes((optimizer as unknown as { state: Map<unknown, unknown> }).state),
  };
}

let trainingStateBytes: ScaleRankResult['trainingStateBytes'] = { parameters: 0, gradients: 0, optimizer: 0 };
const steps: ScaleRankResult['steps'] = [];
let firstStepAtMs = 0;
probeDisk();
for (let step = 0; step < request.warmupSteps + request.measuredSteps; step++) {
  if (step === 0) firstStepAtMs = Date.now();
  const stepStart = performance.now();
  const cpuStart = process.cpuUsage();
  const ioStart = storageIo();
  const loss = backward(model, () => crossEntropy(model.forward(tokens), targets));
  const backwardDone = performance.now();
  sampleRss(step === 0 ? 'first backward' : 'backward');
  optimizer.step();
  if (step === 0) trainingStateBytes = measureTrainingState();
  optimizer.zeroGrad();
  const stepEnd = performance.now();
  const cpu = process.cpuUsage(cpuStart);
  const ioEnd = storageIo();
  sampleRss(step === 0 ? 'first optimizer step' : 'optimizer step');
  const statistics =
    model instanceof FullyShardedDataParallel ? model.statistics : { allGatherWaitMs: 0, reductionWaitMs: 0 };
  const forwardBackwardMs = backwardDone - stepStart;
  process.stderr.write(
    `[scale] rank ${rank} step ${step} took ${(stepEnd - stepStart).toFixed(0)} ms (loss ${loss.toFixed(4)})\n`,
  );
  steps.push({
    loss,
    stepMs: stepEnd - stepStart,
    cpuMs: (cpu.user + cpu.system) / 1000,
    computeMs: forwardBackwardMs - statistics.allGatherWaitMs - statistics.reductionWaitMs,
    allGatherWaitMs: statistics.allGatherWaitMs,
    reductionWaitMs: statistics.reductionWaitMs,
    optimizerMs: stepEnd - backwardDone,
    ...(request.offload === undefined || !(model instanceof FullyShardedDataParallel)
      ? {}
      : { offload: { ...model.offloadStatistics } }),
    storageReadBytes: ioEnd.read - ioStart.read,
    storageWrittenBytes: ioEnd.written - ioStart.written,
  });
}
probeDisk();

const result: ScaleRankResult = {
  rank,
  runtimeRssBytes,
  peakRssBytes: peakRss,
  phaseRssBytes: phaseRss,
  estimateBytes,
  parameters: parameterCount,
  deferred,
  trainingStateBytes,
  initMs,
  wrapMs,
  scriptStartMs,
  firstStepAtMs,
  steps,
  checkpoint: undefined,
  ...(diskProbe === undefined ? {} : { diskProbe }),
};
// Written before the checkpoint too, so a rank stopped while saving (the cgroup counts the page
// cache its writes dirty) still reports its training figures.
const resultFile = `${request.output}.rank${rank}.json`;
writeFileSync(resultFile, JSON.stringify(result));

if (
  request.checkpointDirectory !== undefined &&
  model instanceof FullyShardedDataParallel &&
  group !== null
) {
  // Every rank writes as many bytes as its checkpoint file at the same time, right before and
  // right after the save (disk-rate.ts); the save is timed between barriers the same way.
  const fileBytes = checkpointFileBytes(model);
  const diskFile = join(request.checkpointDirectory, `..`, `disk-rate-${rank}-${process.pid}.bin`);
  const diskBeforeMs = concurrently(() => timeSequentialWrite(diskFile, fileBytes));
  let saved: ReturnType<typeof saveCheckpoint> | undefined;
  const saveMs = concurrently(() => {
    saved = saveCheckpoint(request.checkpointDirectory!, { model, optimizer, step: 1, keep: 1 });
  });
  sampleRss('checkpoint saved');
  const diskAfterMs = concurrently(() => timeSequentialWrite(diskFile, fileBytes));
  const bytes = readdirSync(saved!.path).reduce(
    (sum, name) => sum + statSync(join(saved!.path, name)).size,
    0,
  );
  // Written before loading too, so a rank stopped while loading still reports its save.
  result.checkpoint = {
    saveMs,
    loadMs: Number.NaN,
    bytes,
    diskBeforeMs,
    diskAfterMs,
    diskBytesPerRank: fileBytes,
  };
  writeFileSync(resultFile, JSON.stringify(result));
  const loadMs = concurrently(() => {
    loadCheckpoint(saved!.path, { model, optimizer });
  });
  sampleRss('checkpoint loaded');
  result.checkpoint = { ...result.checkpoint, loadMs };
  result.peakRssBytes = peakRss;
  writeFileSync(resultFile, JSON.stringify(result));
}
tokens.dispose();
targets.dispose();
await group?.destroy();
