/**
 * One rank of the multi-host test, started by `fsdp-run --nnodes 2` inside a network namespace:
 *   multi-host-rank.ts parity <output directory> <hybrid: yes|no>
 *     reports the TCP sockets of its namespace, runs the collectives subset (all-reduce, all-gather,
 *     reduce-scatter of 1 MiB per rank, float32 and bfloat16) against results computed here
 *     without the collectives code, then trains the tiny GPT 5 steps with FSDP full-shard (and
 *     hybrid-shard: shard inside a host, replicate across hosts), writing rank-<r>.json.
 *   multi-host-rank.ts endless
 *     trains full-shard until killed, printing `STEP <n>` after every step.
 *   multi-host-rank.ts mpi-parity <output directory>
 *     started by mpirun across the hosts (multi-host-mpi.int.test.ts): the process group comes
 *     from initProcessGroup()'s MPI job detection; runs the conformance suite's core ops
 *     (all-reduce, all-gather, reduce-scatter, broadcast, barrier) and the full-shard training,
 *     writing rank-<r>.json.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import {
  type CollectiveDtype,
  initProcessGroup,
  type ProcessGroup,
  readEnvironment,
} from '@fsdp-ts/collectives';
import * as fsdp from '@fsdp-ts/fsdp';
import { type FsdpOptions, FullyShardedDataParallel, type ShardingStrategy } from '@fsdp-ts/fsdp';
import { backward, crossEntropy, GPT, TransformerBlock } from '@fsdp-ts/nn';
import { AdamW } from '@fsdp-ts/optim';
import { bfloat16ToFloat32Scalar, float32ToBfloat16Scalar, initBackend } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import { conformanceCases } from '../../collectives/test/conformance/cases';
import { runConformance } from '../../collectives/test/conformance/run-conformance';
import { batchTensors, localPieces, type TrainingResult, tinyConfig } from './fixtures/training-run';
import {
  BATCH_PER_RANK,
  type CaseOutcome,
  type MultiHostReport,
  SEQ_LEN,
  type SocketEntry,
} from './multi-host-report';

const ONE_MIB = 1 << 20;

function decodeAddress(hex: string): string {
  const [hexAddress, hexPort] = hex.split(':') as [string, string];
  const address =
    hexAddress.length === 8
      ? [3, 2, 1, 0].map((byte) => Number.parseInt(hexAddress.slice(byte * 2, byte * 2 + 2), 16)).join('.')
      : /^0+$/.test(hexAddress)
        ? '::'
        : `ipv6:${hexAddress}`;
  return `${address}:${Number.parseInt(hexPort, 16)}`;
}

/** Every TCP socket of this network namespace now (IPv4 and IPv6, from /proc/self/net). */
function tcpSockets(): SocketEntry[] {
  const sockets: SocketEntry[] = [];
  for (const file of ['/proc/self/net/tcp', '/proc/self/net/tcp6']) {
    for (const line of readFileSync(file, 'utf8').split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields.length < 4) continue;
      const state = fields[3] === '0A' ? 'listen' : fields[3] === '01' ? 'established' : 'other';
      sockets.push({ state, local: decodeAddress(fields[1]!), remote: decodeAddress(fields[2]!) });
    }
  }
  return sockets;
}

/**
 * Input element `index` of `rank` for case `seed`: ±(1 + k/2^m)·2^e with e in [-3, 3] and m = 13
 * (float32) or 7 (bfloat16, so the value is exact in bfloat16). Any sum of 4 such values is exact
 * in float32 whatever the order, so the expected result is the float64 sum rounded once.
 */
function inputValue(rank: number, index: number, seed: number, dtype: CollectiveDtype): number {
  let hash = Math.imul(index + 1, 0x9e3779b1) ^ Math.imul(rank + 7, 0x85ebca6b) ^ Math.imul(seed, 0xc2b2ae35);
  hash = (hash ^ (hash >>> 15)) >>> 0;
  const bits = dtype === 'bfloat16' ? 7 : 13;
  const mantissa = 1 + ((hash >>> 4) % 2 ** bits) / 2 ** bits;
  return (hash & 8 ? -1 : 1) * mantissa * 2 ** ((hash % 7) - 3);
}

function shared(dtype: CollectiveDtype, length: number): Float32Array | Uint16Array {
  return dtype === 'bfloat16'
    ? new Uint16Array(new SharedArrayBuffer(length * 2))
    : new Float32Array(new SharedArrayBuffer(length * 4));
}

function encode(dtype: CollectiveDtype, value: number): number {
  return dtype === 'bfloat16' ? float32ToBfloat16Scalar(value) : value;
}

function decode(dtype: CollectiveDtype, element: number): number {
  return dtype === 'bfloat16' ? bfloat16ToFloat32Scalar(element) : element;
}

/** The reference rounding of an exact sum: once, to float32 or to bfloat16 (nearest even). */
function rounded(dtype: CollectiveDtype, exact: number): number {
  return dtype === 'bfloat16' ? bfloat16ToFloat32Scalar(float32ToBfloat16Scalar(exact)) : Math.fround(exact);
}

function firstMismatch(
  actual: Float32Array | Uint16Array,
  dtype: CollectiveDtype,
  expected: (index: number) => number,
): string | undefined {
  for (let index = 0; index < actual.length; index++) {
    const got = decode(dtype, actual[index]!);
    const want = expected(index);
    if (!Object.is(got, want)) return `element ${index}: got ${got}, expected ${want}`;
  }
  return undefined;
}

async function collectivesSubset(group: ProcessGroup): Promise<CaseOutcome[]> {
  const { rank, size } = group;
  const outcomes: CaseOutcome[] = [];
  let seed = 1;
  for (const dtype of ['float32', 'bfloat16'] as const) {
    const count = ONE_MIB / (dtype === 'bfloat16' ? 2 : 4);
    const sumOver = (element: (peer: number) => number) => {
      let exact = 0;
      for (let peer = 0; peer < size; peer++) exact += element(peer);
      return rounded(dtype, exact);
    };
    const cases: [string, () => Promise<string | undefined>][] = [
      [
        `allReduce sum ${dtype} 1 MiB`,
        async (caseSeed = seed++) => {
          const buffer = shared(dtype, count);
          for (let i = 0; i < count; i++) buffer[i] = encode(dtype, inputValue(rank, i, caseSeed, dtype));
          await group.allReduce(buffer, { op: 'sum', dtype });
          return firstMismatch(buffer, dtype, (i) => sumOver((peer) => inputValue(peer, i, caseSeed, dtype)));
        },
      ],
      [
        `allGather ${dtype} 1 MiB per rank`,
        async (caseSeed = seed++) => {
          const input = shared(dtype, count);
          for (let i = 0; i < count; i++) input[i] = encode(dtype, inputValue(rank, i, caseSeed, dtype));
          const output = shared(dtype, count * size);
          await group.allGather(output, input, { dtype });
          return firstMismatch(output, dtype, (i) =>
            rounded(dtype, inputValue(Math.floor(i / count), i % count, caseSeed, dtype)),
          );
        },
      ],
      [
        `reduceScatter sum ${dtype} 1 MiB per rank`,
        async (caseSeed = seed++) => {
          const input = shared(dtype, count * size);
          for (let i = 0; i < count * size; i++)
            input[i] = encode(dtype, inputValue(rank, i, caseSeed, dtype));
          const output = shared(dtype, count);
          await group.reduceScatter(output, input, { op: 'sum', dtype });
          return firstMismatch(output, dtype, (i) =>
            sumOver((peer) => inputValue(peer, rank * count + i, caseSeed, dtype)),
          );
        },
      ],
    ];
    for (const [name, run] of cases) {
      progress(name);
      let failure: string | undefined;
      try {
        failure = await run();
      } catch (error) {
        failure = `threw ${error instanceof Error ? error.message : String(error)}`;
      }
      outcomes.push(failure === undefined ? { name } : { name, failure: `rank ${rank}: ${failure}` });
    }
  }
  return outcomes;
}

/**
 * hybridShardGroups when this build of @fsdp-ts/fsdp has hybrid sharding (looked up at run time,
 * so this file also runs against a build without it).
 */
const hybridShardGroups = (fsdp as Record<string, unknown>).hybridShardGroups as
  | ((
      group: ProcessGroup,
      shardGroupSize: number,
    ) => Promise<{ shardGroup: ProcessGroup; replicateGroup: ProcessGroup }>)
  | undefined;

/** FSDP training of the tiny GPT on this rank's samples (AdamW as in trainReference). */
async function train(
  group: ProcessGroup,
  /** 'full-shard' or 'hybrid-shard' (a string: builds without hybrid sharding lack the name). */
  strategy: string,
  steps: number,
  onStep: (step: number) => void = () => {},
): Promise<Pick<TrainingResult, 'losses' | 'pieces'>> {
  const common = { autoWrapPolicy: [TransformerBlock], flattenParameters: true };
  const inner = new GPT(tinyConfig);
  // hybrid-shard: shard groups of one host's ranks, replicate groups across hosts; destroyed at
  // the end (a sub-group left open keeps the process alive).
  const hybridGroups =
    strategy === 'hybrid-shard' && hybridShardGroups !== undefined
      ? await hybridShardGroups(group, readEnvironment().localWorldSize)
      : undefined;
  const model =
    hybridGroups === undefined
      ? new FullyShardedDataParallel(inner, {
          ...common,
          group,
          shardingStrategy: strategy as ShardingStrategy,
        })
      : new FullyShardedDataParallel(inner, {
          ...common,
          shardingStrategy: strategy as ShardingStrategy,
          ...hybridGroups,
        } as FsdpOptions);
  progress(`${strategy} wrapped`);
  const optimizer = new AdamW(model.parameters(), { lr: 1e-3, weightDecay: 0.1, eps: 1e-6 });
  const losses: number[] = [];
  for (let step = 0; step < steps; step++) {
    const { tokens, targets } = batchTensors(
      step,
      group.rank * BATCH_PER_RANK,
      BATCH_PER_RANK,
      SEQ_LEN,
      tinyConfig.vocabSize,
    );
    const loss = backward(model, () => crossEntropy(model.forward(tokens), targets));
    tf.dispose([tokens, targets]);
    optimizer.step();
    optimizer.zeroGrad();
    const global = new Float32Array(new SharedArrayBuffer(4));
    global[0] = loss;
    group.allReduce(global, { op: 'avg' }).wait();
    losses.push(global[0]!);
    progress(`${strategy} step ${step}`);
    onStep(step);
  }
  const pieces = localPieces(model, 'data');
  await hybridGroups?.shardGroup.destroy();
  await hybridGroups?.replicateGroup.destroy();
  return { losses, pieces };
}

/** A progress line (prefixed `[rank r]` by fsdp-run): shows where a stuck run stopped. */
function progress(what: string): void {
  process.stdout.write(`PROGRESS ${what} at ${Math.round(performance.now())} ms\n`);
}

/**
 * The conformance suite's cases of the core ops: every dtype, size, reduction, in-place and
 * bfloat16-wire case of all-reduce, all-gather, reduce-scatter, broadcast and barrier. Left out:
 * send/recv, the refused overlaps, and the arena cases (where the shm backend places buffers;
 * the single-host mpi conformance run has them).
 */
const CORE_KINDS = new Set(['allReduce', 'allGather', 'reduceScatter', 'broadcast', 'barrier']);

const [scenario, outputDirectory, hybrid] = process.argv.slice(2);
await initBackend('cpu');
// Under mpirun the group is whatever initProcessGroup() detects (the test expects mpi).
const group = await initProcessGroup(scenario === 'mpi-parity' ? {} : { backend: 'tcp' });
progress('process group ready');
try {
  if (scenario === 'mpi-parity') {
    const cases = conformanceCases(group.size, { huge: false, wire: true }).filter(
      (testCase) => CORE_KINDS.has(testCase.kind) && !testCase.overlap && !testCase.arena,
    );
    progress(`${cases.length} conformance cases`);
    const report: MultiHostReport = {
      rank: group.rank,
      backend: group.backend,
      hostname: hostname(),
      sockets: tcpSockets(),
      collectives: await runConformance(group, cases),
      training: {},
    };
    progress('full-shard training');
    report.training['full-shard'] = await train(group, 'full-shard', 5);
    writeFileSync(join(outputDirectory!, `rank-${group.rank}.json`), JSON.stringify(report));
  } else if (scenario === 'parity') {
    const report: MultiHostReport = {
      rank: group.rank,
      sockets: tcpSockets(),
      collectives: await collectivesSubset(group),
      training: {},
    };
    progress('full-shard training');
    report.training['full-shard'] = await train(group, 'full-shard', 5);
    progress('hybrid-shard training');
    if (hybrid === 'yes') report.training['hybrid-shard'] = await train(group, 'hybrid-shard', 5);
    writeFileSync(join(outputDirectory!, `rank-${group.rank}.json`), JSON.stringify(report));
  } else if (scenario === 'endless') {
    await train(group, 'full-shard', 1_000_000, (step) => process.stdout.write(`STEP ${step}\n`));
  } else {
    throw new Error(`unknown scenario '${scenario}'; expected parity, endless or mpi-parity`);
  }
} finally {
  await group.destroy();
}
