/**
 * One rank of an FSDP benchmark run (under fsdp-run), or the single-process baseline (plain node).
 *   node --conditions=@fsdp-ts/source --import tsx bench/training-rank.ts '<RunRequest[] JSON>'
 * Builds every requested row in the same processes and runs their steps interleaved (step 1 of
 * row A, of row B, ..., then step 2 of each, starting one row later: ABAB, rotated), so a noisy
 * moment hits every row alike.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { join } from 'node:path';
import { initProcessGroup, type ProcessGroup } from '@fsdp-ts/collectives';
import { FullyShardedDataParallel, type ShardingStrategy } from '@fsdp-ts/fsdp';
import { backward, crossEntropy, GPT, type Module, TransformerBlock } from '@fsdp-ts/nn';
import { AdamW } from '@fsdp-ts/optim';
import { initBackend, Parameter, storagePool } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import { type MemorySample, type RunRequest, type RunResult, spread } from './bench-config';
import { JobCpu, type JobCpuSample } from './job-cpu';
import { PhaseProfile, threadsStartedBy } from './phase-profile';

const requests = JSON.parse(process.argv[2]!) as RunRequest[];
/** BENCH_CPU_PROFILE=dir: one V8 CPU profile per rank of all rows (warm-up included), for DevTools or speedscope. */
const profileDirectory = process.env.BENCH_CPU_PROFILE;
await initBackend('wasm');
const { value: group, threads: communicationThreads } = await threadsStartedBy(
  async (): Promise<ProcessGroup | null> =>
    requests.every((request) => request.kind === 'single') ? null : await initProcessGroup(),
);
const worldSize = group?.size ?? 1;
/**
 * BENCH_WIRE_COUNTER (bench/cluster): a file holding a byte count, the veth's
 * /sys/class/net/<link>/statistics/tx_bytes inside this rank's network namespace; each measured
 * step records what this rank's host sent during it (wireBytesSamples).
 */
const wireCounter = process.env.BENCH_WIRE_COUNTER;
const sentBytes = () => (wireCounter === undefined ? 0 : Number(readFileSync(wireCounter, 'utf8')));
/** BENCH_JOB_CPU (bench/cluster): rank 0 counts every process of the job per step (job-cpu.ts). */
const jobCpu = (group?.rank ?? 0) === 0 ? JobCpu.fromEnvironment() : undefined;
/** With BENCH_CPU_PROFILE: each measured step's [start, end] in µs of the profile's clock (CLOCK_MONOTONIC). */
const nowMicroseconds = () => Number(process.hrtime.bigint() / 1000n);
interface Row {
  readonly request: RunRequest;
  readonly steps: number;
  step(index: number): void;
  result(): RunResult;
}

/** Builds one row; every rank builds the same rows in the same order. */
async function prepare(request: RunRequest): Promise<Row> {
  const inner = new GPT(request.config);
  const parameterCount = inner
    .parameters()
    .reduce((sum, parameter) => sum + parameter.shape.reduce((a, b) => a * b, 1), 0);

  let model: Module = inner;
  let forward = (input: tf.Tensor) => inner.forward(input);
  let wrapped: FullyShardedDataParallel<GPT> | null = null;
  if (group !== null && request.kind !== 'two-singles') {
    const strategy: ShardingStrategy = request.kind.startsWith('no-shard')
      ? 'no-shard'
      : request.kind.startsWith('shard-grad-op')
        ? 'shard-grad-op'
        : request.kind === 'hybrid-shard'
          ? 'hybrid-shard'
          : 'full-shard';
    const options = {
      group,
      shardingStrategy: strategy,
      autoWrapPolicy: [TransformerBlock],
      activationCheckpointing: request.kind === 'full-shard-recompute',
      flattenParameters: !request.kind.endsWith('-unflat'),
      ...(request.mixedPrecision === undefined ? {} : { mixedPrecision: request.mixedPrecision }),
    };
    // hybrid-shard: a shard group per host (fsdp-run's ranks per node), replicated across hosts.
    wrapped =
      strategy === 'hybrid-shard'
        ? await FullyShardedDataParallel.create(inner, {
            ...options,
            shardGroupSize: Number(process.env.LOCAL_WORLD_SIZE ?? group.size),
          })
        : new FullyShardedDataParallel(inner, options);
    model = wrapped;
    const fsdp = wrapped;
    forward = (input: tf.Tensor) => fsdp.forward(input);
  }
  const handles = wrapped?.units.flatMap((unit) => unit.handles) ?? [];
  const largestUnitNumel = Math.max(
    0,
    ...(wrapped?.units.map((unit) =>
      unit.handles.reduce((sum, handle) => sum + handle.layout.paddedNumel, 0),
    ) ?? [parameterCount]),
  );

  // The optimizer of each row (see bench-config.ts).
  let flatParameters: { parameter: Parameter; handle: (typeof handles)[number] }[] = [];
  function makeOptimizer(): AdamW {
    const options = { lr: 1e-4, weightDecay: 0.01 };
    if (request.kind === 'full-shard-flat-optimizer') {
      flatParameters = handles.map((handle, index) => ({
        parameter: new Parameter(handle.shardedBuffer(), { name: `flat.${index}` }),
        handle,
      }));
      return new AdamW(
        flatParameters.map(({ parameter }) => parameter),
        options,
      );
    }
    if (request.kind === 'full-shard-submodule-optimizer') {
      return new AdamW(
        [
          ...inner.blocks.children().map((block) => ({ params: block.parameters() })),
          {
            params: [
              ...inner.tokenEmbedding.parameters(),
              ...inner.positionEmbedding.parameters(),
              ...inner.finalNorm.parameters(),
            ],
          },
        ],
        options,
      );
    }
    return new AdamW(model.parameters(), options);
  }
  const optimizer = makeOptimizer();

  function storageBytes(): number {
    let total = 0;
    for (const handle of handles) total += handle.allocatedBytes;
    if (wrapped === null) {
      for (const parameter of inner.parameters()) {
        total += parameter.data.numel * 4;
        if (parameter.grad !== null) total += parameter.grad.numel * 4;
      }
    }
    return total;
  }

  function typedArrayBytes(value: unknown, seen = new Set<unknown>()): number {
    if (ArrayBuffer.isView(value)) return value.byteLength;
    if (value === null || typeof value !== 'object' || seen.has(value)) return 0;
    seen.add(value);
    let total = 0;
    for (const entry of Object.values(value as Record<string, unknown>))
      total += typedArrayBytes(entry, seen);
    return total;
  }

  let optimizerBytes = 0;
  const peak: MemorySample = { storageBytes: 0, optimizerBytes: 0, tfBytes: 0 };
  let peakTotal = 0;
  let sampling = false;
  function sample(): void {
    if (!sampling) return;
    const storage = storageBytes();
    const tfBytes = tf.memory().numBytes;
    if (storage + optimizerBytes > peakTotal) {
      peakTotal = storage + optimizerBytes;
      peak.storageBytes = storage;
      peak.optimizerBytes = optimizerBytes;
    }
    peak.tfBytes = Math.max(peak.tfBytes, tfBytes);
  }
  // Sample inside every unit's forward (and its recomputation in backward): the moments its
  // gathered buffers are alive.
  for (const block of inner.blocks.children()) {
    const target = (block as TransformerBlock).mlp as unknown as { forward: (x: tf.Tensor) => tf.Tensor };
    const original = target.forward.bind(target);
    target.forward = (x: tf.Tensor) => {
      sample();
      return original(x);
    };
  }

  const tokenValues = Int32Array.from(
    { length: request.batch * request.seqLen },
    (_, index) => (index * 7919 + (group?.rank ?? 0) * 31) % request.config.vocabSize,
  );
  const tokens = tf.tensor(tokenValues, [request.batch, request.seqLen], 'int32');
  const targets = tf.tensor(
    tokenValues.map((value) => (value + 1) % request.config.vocabSize),
    [request.batch, request.seqLen],
    'int32',
  );
  const stepTimes: number[] = [];
  const cpuTimes: number[] = [];
  const allGatherWaits: number[] = [];
  const reductionWaits: number[] = [];
  const losses: number[] = [];
  const wireSamples: number[] = [];
  const jobCpuSamples: JobCpuSample[] = [];
  const profileWindows: [number, number][] = [];
  let poolAtStart = storagePool.statistics;
  const phases = new PhaseProfile(request.profilePhases === true, communicationThreads);
  function step(index: number): void {
    sampling = index >= request.warmupSteps;
    if (index === request.warmupSteps) poolAtStart = storagePool.statistics;
    group?.barrier().wait(); // every rank starts the step together
    const wireStart = sentBytes();
    jobCpu?.begin(index < request.warmupSteps);
    const windowStart = nowMicroseconds();
    const start = performance.now();
    const cpuStart = process.cpuUsage();
    phases.begin();
    const loss = backward(model, () => {
      const value = crossEntropy(forward(tokens), targets);
      phases.mark('forward');
      return value;
    });
    phases.mark('backward');
    phases.add('waiting', wrapped?.statistics.reductionWaitMs ?? 0);
    sample();
    for (const { parameter, handle } of flatParameters) parameter.grad = handle.shardedGradBuffer();
    optimizer.step();
    phases.mark('optimizer');
    if (index === request.warmupSteps) optimizerBytes = typedArrayBytes(optimizer.stateDict());
    sample();
    optimizer.zeroGrad();
    if (flatParameters.length > 0) for (const parameter of model.parameters()) parameter.grad = null;
    phases.mark('zeroGrad');
    // Two independent singles: the pair's step lasts until the slower one ends.
    if (request.kind === 'two-singles') {
      const waitStart = performance.now();
      group?.barrier().wait();
      phases.add('waiting', performance.now() - waitStart);
    }
    phases.end(index >= request.warmupSteps);
    const elapsed = performance.now() - start;
    const cpu = process.cpuUsage(cpuStart);
    const windowEnd = nowMicroseconds();
    const jobSample = jobCpu?.end();
    losses.push(loss);
    if (index >= request.warmupSteps) {
      if (jobSample !== undefined) jobCpuSamples.push(jobSample);
      if (profileDirectory !== undefined) profileWindows.push([windowStart, windowEnd]);
      stepTimes.push(elapsed);
      cpuTimes.push((cpu.user + cpu.system) / 1000);
      if (wireCounter !== undefined) wireSamples.push(sentBytes() - wireStart);
      allGatherWaits.push(wrapped?.statistics.allGatherWaitMs ?? 0);
      reductionWaits.push(wrapped?.statistics.reductionWaitMs ?? 0);
    }
  }
  function result(): RunResult {
    const stepMs = spread(stepTimes);
    const tokensPerStep = worldSize * request.batch * request.seqLen;
    tf.dispose([tokens, targets]);
    return {
      kind: request.kind,
      worldSize,
      parameters: parameterCount,
      largestUnitNumel,
      units: wrapped?.units.length ?? 1,
      stepMs,
      stepSamples: stepTimes,
      cpuSamples: cpuTimes,
      cpuMs: spread(cpuTimes),
      tokensPerSecond: {
        min: (tokensPerStep * 1000) / stepMs.max,
        median: (tokensPerStep * 1000) / stepMs.median,
        max: (tokensPerStep * 1000) / stepMs.min,
      },
      allGatherWaitMs: spread(allGatherWaits),
      reductionWaitMs: spread(reductionWaits),
      peak: { ...peak, parametersGradientsOptimizerBytes: peak.storageBytes + peak.optimizerBytes },
      // Allocations of pooled storages in the measured steps (all rows of the launch share the pool).
      storagePool: {
        reused: storagePool.statistics.reused - poolAtStart.reused,
        fresh: storagePool.statistics.fresh - poolAtStart.fresh,
      },
      losses,
      ...(wireCounter === undefined ? {} : { wireBytesSamples: wireSamples }),
      ...(jobCpu === undefined ? {} : { jobCpuSamples }),
      ...(profileDirectory === undefined ? {} : { profileWindowsUs: profileWindows }),
      ...(phases.enabled ? { phases: phases.samples } : {}),
    };
  }
  return { request, steps: request.warmupSteps + request.measuredSteps, step, result };
}

const session = profileDirectory === undefined ? null : new Session();
session?.connect();
await session?.post('Profiler.enable');
await session?.post('Profiler.start');
const rows: Row[] = [];
for (const request of requests) rows.push(await prepare(request));
const longest = Math.max(...rows.map((row) => row.steps));
// Step `index` starts at row `index mod rows`: no row always runs right after the same other row
// (what one row leaves behind, garbage or a communication worker still busy, lands on each alike).
for (let index = 0; index < longest; index++) {
  for (let position = 0; position < rows.length; position++) {
    const row = rows[(index + position) % rows.length]!;
    if (index < row.steps) row.step(index);
  }
}
if (session !== null && profileDirectory !== undefined) {
  const { profile } = await session.post('Profiler.stop');
  const name = requests.map((request) => request.kind).join('+');
  writeFileSync(
    join(profileDirectory, `${name}-rank${group?.rank ?? 0}.cpuprofile`),
    JSON.stringify(profile),
  );
}
for (const row of rows) {
  const result = row.result();
  if ((group?.rank ?? 0) === 0) writeFileSync(row.request.output, `${JSON.stringify(result)}\n`);
}
await group?.destroy();
