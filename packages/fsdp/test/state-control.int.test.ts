import { spawnThreadRanks } from '@fsdp-ts/collectives';
import { describe, expect, it } from 'vitest';
import {
  type AccumulateResult,
  type Pieces,
  type ReshardArguments,
  referenceGradients,
  referenceInitialValues,
  type SavedRank,
  type Scenario,
  type ScenarioResult,
  type StateArguments,
  type SummonResult,
  type TrainResult,
  trainReference,
} from './fixtures/state-rank';

const fixture = new URL('./fixtures/state-rank.ts', import.meta.url);
// Generous bounds: thread start-up (tsx + tfjs per thread) dominates on a loaded 2-core machine.
const timeoutMs = 600_000;

function base(worldSize: number, overrides: Partial<StateArguments> = {}): StateArguments {
  return { worldSize, strategy: 'full-shard', batch: 1, seqLen: 8, ...overrides };
}

/** Reassembles every parameter from the ranks' pieces; NaN where no rank reported an element. */
function assemble(results: Pieces[], reference: Pieces): Record<string, number[]> {
  const full: Record<string, number[]> = {};
  for (const [name, { values }] of Object.entries(reference)) {
    const assembled = new Array<number>(values.length).fill(Number.NaN);
    for (const pieces of results) {
      const piece = pieces[name];
      expect(piece, `a rank lacks ${name}`).toBeDefined();
      piece!.values.forEach((value, index) => {
        assembled[piece!.offset + index] = value;
      });
    }
    full[name] = assembled;
  }
  return full;
}

/** |actual - expected| <= tolerance × (largest |expected| of the tensor), element by element. */
function expectSameTensors(
  actual: Record<string, number[]>,
  expected: Pieces,
  tolerance: number,
  what: string,
): void {
  for (const [name, { values }] of Object.entries(expected)) {
    const scale = Math.max(...values.map(Math.abs), 1e-12);
    values.forEach((value, index) => {
      const got = actual[name]![index]!;
      expect(Math.abs(got - value), `${what} ${name}[${index}]: ${got} vs ${value}`).toBeLessThanOrEqual(
        tolerance * scale,
      );
    });
  }
}

function norms(pieces: Pieces): { two: number; infinity: number } {
  let sum = 0;
  let max = 0;
  for (const { values } of Object.values(pieces))
    for (const value of values) {
      sum += value * value;
      max = Math.max(max, Math.abs(value));
    }
  return { two: Math.sqrt(sum), infinity: max };
}

/** Runs scenarios on W thread ranks; result[s][r] is scenario s on rank r. */
async function run(worldSize: number, scenarios: Scenario[]): Promise<ScenarioResult[][]> {
  const perRank = (await spawnThreadRanks(worldSize, fixture, 'scenarioRank', {
    args: { scenarios },
    timeoutMs,
  })) as ScenarioResult[][];
  return scenarios.map((_, index) => perRank.map((results) => results[index]!));
}

function once<T>(make: () => Promise<T>): () => Promise<T> {
  let promise: Promise<T> | undefined;
  return () => {
    promise ??= make();
    return promise;
  };
}

// Few thread starts: every scenario of one world size runs on the same ranks, one model each.
const mixedBoth = { paramDtype: 'bfloat16', reduceDtype: 'bfloat16' } as const;
const mixedGather = { paramDtype: 'bfloat16', reduceDtype: 'float32' } as const;
const reshardCommon = { seqLen: 8, batch: 1, globalBatch: 6, continueSteps: 1 };
const saveArgs: ReshardArguments = { ...reshardCommon, worldSize: 2, strategy: 'full-shard', trainSteps: 2 };
// No-shard with a bfloat16 reduce waits for unit k-1's all-reduce during backward (see
// [Note: bounded gradient memory]); its gradients must still be right.
const noShardReduce16 = base(2, {
  strategy: 'no-shard',
  mixedPrecision: { paramDtype: 'float32', reduceDtype: 'bfloat16' },
  batch: 2,
  steps: 4,
});
const worldTwo = once(() =>
  run(2, [
    { kind: 'accumulate', args: base(2) },
    { kind: 'summon', args: base(2) },
    { kind: 'train', args: base(2, { mixedPrecision: mixedBoth, batch: 2, steps: 4 }) },
    { kind: 'train', args: base(2, { mixedPrecision: mixedGather, batch: 2, steps: 4 }) },
    { kind: 'reshard', args: saveArgs },
    { kind: 'train', args: noShardReduce16 },
  ]),
);
const worldThree = once(async () => {
  const saved = (await worldTwo())[4] as SavedRank[];
  return run(3, [
    { kind: 'accumulate', args: base(3, { strategy: 'shard-grad-op' }) },
    { kind: 'accumulate', args: base(3, { strategy: 'no-shard' }) },
    { kind: 'summon', args: base(3, { strategy: 'no-shard' }) },
    {
      kind: 'reshard',
      args: {
        ...reshardCommon,
        worldSize: 3,
        strategy: 'shard-grad-op',
        trainSteps: 0,
        load: { sharded: saved.map((rank) => rank.sharded), optim: saved.map((rank) => rank.shardedOptim) },
      },
    },
    {
      kind: 'reshard',
      args: {
        ...reshardCommon,
        worldSize: 3,
        strategy: 'no-shard',
        trainSteps: 0,
        loadFull: { full: saved[0]!.full, optim: saved[0]!.fullOptim },
      },
    },
  ]);
});
const worldOne = once(async () => {
  const saved = (await worldThree())[3] as SavedRank[];
  return run(1, [
    {
      kind: 'reshard',
      args: {
        ...reshardCommon,
        worldSize: 1,
        strategy: 'full-shard',
        trainSteps: 0,
        load: { sharded: saved.map((rank) => rank.sharded), optim: saved.map((rank) => rank.shardedOptim) },
        checkErrors: true,
      },
    },
  ]);
});
const hybridArgs = base(4, { strategy: 'hybrid-shard', shardGroupSize: 2, steps: 3 });
// Hybrid with a bfloat16 reduce: both the shard group's reduce-scatter and the replicas'
// all-reduce move bfloat16, so every reduced gradient element is a bfloat16 value.
const hybridReduce16 = base(4, {
  strategy: 'hybrid-shard',
  shardGroupSize: 2,
  steps: 3,
  mixedPrecision: { paramDtype: 'float32', reduceDtype: 'bfloat16' },
});
const worldFour = once(() =>
  run(4, [
    { kind: 'train', args: hybridArgs },
    { kind: 'train', args: hybridReduce16 },
  ]),
);

async function checkAccumulation(args: StateArguments, results: AccumulateResult[]): Promise<void> {
  // Tolerances: gradients 1e-5 of the tensor's largest |gradient| (summation order differs);
  // norms 1e-6 relative to the norm of the reference gradient (float64 sums of float32 values).
  const reference = await referenceGradients(args, 4 * args.worldSize * args.batch);
  expectSameTensors(
    assemble(
      results.map((result) => result.gradients),
      reference,
    ),
    reference,
    1e-5,
    'grad',
  );
  const expected = norms(reference); // computed independently here, in float64
  for (const result of results) {
    expect(Math.abs(result.norm2 - expected.two) / expected.two).toBeLessThanOrEqual(1e-6);
    expect(Math.abs(result.normInfinity - expected.infinity) / expected.infinity).toBeLessThanOrEqual(1e-6);
  }
  expect(expected.two).toBeGreaterThan(0.05); // so the clip really scales
  const coefficient = 0.05 / (expected.two + 1e-6);
  const clippedReference: Pieces = Object.fromEntries(
    Object.entries(reference).map(([name, { values }]) => [
      name,
      { offset: 0, values: values.map((value) => value * coefficient) },
    ]),
  );
  expectSameTensors(
    assemble(
      results.map((result) => result.clipped),
      reference,
    ),
    clippedReference,
    1e-5,
    'clipped grad',
  );
}

describe('noSync and clipGradNorm against one unwrapped batch of 4x the size', () => {
  it('full-shard, W=2: 3 no-sync micro-batches + 1 synchronised', { timeout: timeoutMs }, async () => {
    await checkAccumulation(base(2), (await worldTwo())[0] as AccumulateResult[]);
  });
  it('shard-grad-op, W=3', { timeout: timeoutMs }, async () => {
    await checkAccumulation(
      base(3, { strategy: 'shard-grad-op' }),
      (await worldThree())[0] as AccumulateResult[],
    );
  });
  it('no-shard, W=3', { timeout: timeoutMs }, async () => {
    await checkAccumulation(base(3, { strategy: 'no-shard' }), (await worldThree())[1] as AccumulateResult[]);
  });
});

async function checkSummon(args: StateArguments, results: SummonResult[]): Promise<void> {
  const initial = await referenceInitialValues();
  const gradients = await referenceGradients(args, args.worldSize * args.batch);
  const first = results[0]!;
  const values = (pieces: Pieces) =>
    Object.fromEntries(Object.entries(pieces).map(([name, { values }]) => [name, values]));
  expectSameTensors(values(first.fullInside), initial, 0, 'summoned');
  // withGrads: full-shape averaged gradients of one backward on W x B samples (edits undone).
  expectSameTensors(values(first.gradsInside), gradients, 1e-5, 'summoned grad');
  for (const result of results) {
    expect(result.allFullShape).toBe(true);
    expect(result.nested).toMatch(/^wrong-state: summonFullParams\(\) was called during summonFullParams/);
    expect(result.forwardInside).toMatch(/^wrong-state: forward\(\)/);
    expect(result.shardedAfter).toBe(true);
    expect(result.afterWriteback).toBe(42);
    expect(result.afterDiscard).toBe(0.5);
    expect(result.rank0OnlyWriteback).toMatch(/^invalid-option/);
  }
  expect(results.map((result) => result.rank0OnlyFull)).toEqual(
    results.map((_, rank) => rank === 0 || args.strategy === 'no-shard'),
  );
  expect(results.map((result) => result.fullStateDictKeys > 0)).toEqual(results.map((_, rank) => rank === 0));
}

describe('summonFullParams: full views, writeback, withGrads, rank0Only, rejected nesting', () => {
  it('full-shard, W=2', { timeout: timeoutMs }, async () => {
    await checkSummon(base(2), (await worldTwo())[1] as SummonResult[]);
  });
  it('no-shard, W=3', { timeout: timeoutMs }, async () => {
    await checkSummon(base(3, { strategy: 'no-shard' }), (await worldThree())[2] as SummonResult[]);
  });
});

/** Losses and final parameters of a wrapped run against the unwrapped one. */
async function checkTraining(
  args: StateArguments,
  results: TrainResult[],
  tolerance: { loss: number; parameter: number },
): Promise<void> {
  const reference = await trainReference(args, args.steps ?? 1);
  for (const result of results)
    result.losses.forEach((loss, step) => {
      const expected = reference.losses[step]!;
      expect(Math.abs(loss - expected), `loss ${step}: ${loss} vs ${expected}`).toBeLessThanOrEqual(
        tolerance.loss * Math.abs(expected),
      );
    });
  const assembled = assemble(
    results.map((result) => result.pieces),
    reference.pieces,
  );
  for (const [name, { values }] of Object.entries(reference.pieces))
    values.forEach((value, index) => {
      const got = assembled[name]![index]!;
      expect(Math.abs(got - value), `${name}[${index}]: ${got} vs ${value}`).toBeLessThanOrEqual(
        tolerance.parameter * Math.max(Math.abs(value), 0.02),
      );
    });
}

describe('mixed precision and hybrid sharding against the unwrapped float32 run', () => {
  // Stated tolerance for bfloat16 communication (8-bit mantissa, relative rounding 2^-9): losses
  // within 1e-2 relative; parameters after 4 AdamW steps (lr 1e-3) within 0.2 x max(|value|,
  // 0.02), i.e. 4e-3 absolute at the init scale. Adam normalises each update to about lr, so a
  // rounded near-zero gradient can flip an update's sign: the bound is half of the worst case
  // 2 x lr x steps (measured: 1.6e-3).
  const tolerance = { loss: 1e-2, parameter: 0.2 };
  for (const [index, mixedPrecision] of [
    [2, mixedBoth],
    [3, mixedGather],
  ] as const) {
    it(`full-shard, W=2, param ${mixedPrecision.paramDtype} / reduce ${mixedPrecision.reduceDtype}`, {
      timeout: timeoutMs,
    }, async () => {
      const results = (await worldTwo())[index] as TrainResult[];
      await checkTraining(base(2, { mixedPrecision, batch: 2, steps: 4 }), results, tolerance);
      // The shards are float32 masters: most of their elements are not bfloat16 values.
      for (const result of results) expect(result.float32Fraction).toBeGreaterThan(0.9);
    });
  }

  it('no-shard, W=2, param float32 / reduce bfloat16', { timeout: timeoutMs }, async () => {
    const results = (await worldTwo())[5] as TrainResult[];
    await checkTraining(noShardReduce16, results, tolerance);
    for (const result of results) expect(result.float32Fraction).toBeGreaterThan(0.9);
  });

  it('hybrid-shard 2 x 2 (shardGroupSize 2), W=4: parity like full-shard (1e-5)', {
    timeout: timeoutMs,
  }, async () => {
    const results = (await worldFour())[0] as TrainResult[];
    await checkTraining(hybridArgs, results, { loss: 1e-5, parameter: 1e-5 });
    // Replicas (ranks r and r + 2) hold identical shards.
    for (const [name, piece] of Object.entries(results[0]!.pieces))
      expect(results[2]!.pieces[name]).toEqual(piece);
    // float32 reductions: averaged gradients are not bfloat16 values.
    for (const result of results) expect(result.gradientFloat32Fraction).toBeGreaterThan(0.5);
  });

  it('hybrid-shard 2 x 2, W=4, reduce bfloat16: the replicas all-reduce in bfloat16 too', {
    timeout: timeoutMs,
  }, async () => {
    const results = (await worldFour())[1] as TrainResult[];
    await checkTraining(hybridReduce16, results, tolerance);
    // A float32 all-reduce across replicas would average two bfloat16 values into one that
    // needs more mantissa bits: most elements would then not be bfloat16 values.
    for (const result of results) expect(result.gradientFloat32Fraction).toBe(0);
    for (const [name, piece] of Object.entries(results[0]!.pieces))
      expect(results[2]!.pieces[name]).toEqual(piece);
  });
});

describe('state dicts: resharding W=2 -> W=3 -> W=1', () => {
  it('weights and optimizer state survive exactly; training continues identically', {
    timeout: timeoutMs,
  }, async () => {
    const two = (await worldTwo())[4] as SavedRank[];
    const [three, fromFull] = (await worldThree()).slice(3) as SavedRank[][];
    const one = (await worldOne())[0] as SavedRank[];
    const original = two[0]!;
    for (const copy of [three![0]!, three![2]!, one[0]!, fromFull![1]!]) {
      expect(Object.keys(copy.full)).toEqual(Object.keys(original.full));
      for (const [name, { values }] of Object.entries(original.full))
        expect(copy.full[name]!.values).toEqual(values);
      expect(Object.keys(copy.fullOptim.state).sort()).toEqual(Object.keys(original.fullOptim.state).sort());
      for (const [name, state] of Object.entries(original.fullOptim.state)) {
        const other = copy.fullOptim.state[name]!;
        expect(other.step).toBe(state.step);
        expect(other.step).toBe(2);
        for (const [buffer, [piece]] of Object.entries(state.buffers))
          expect(other.buffers[buffer]![0]!.values).toEqual(piece!.values);
      }
    }
    // The sharded dicts carry the flat layouts and this rank's shards (what a checkpoint needs).
    const handles = two[1]!.sharded.handles;
    expect(handles.length).toBe(3); // root + 2 TransformerBlocks
    expect(handles.every((handle) => handle.metadata.worldSize === 2 && handle.rank === 1)).toBe(true);
    expect(handles.every((handle) => handle.shard.length === handle.metadata.shardNumel)).toBe(true);
    // One more step after loading, on the same global batch, gives the same loss everywhere.
    for (const result of [...three!, ...one, ...fromFull!])
      expect(Math.abs(result.continued[0]! - original.continued[0]!)).toBeLessThanOrEqual(
        1e-5 * original.continued[0]!,
      );
    // Errors name every offender.
    const [badNames, badCoverage, badNorm] = one[0]!.errors;
    expect(badNames).toMatch(/^state-dict-mismatch: .*missing .*, .*unexpected extra.* has shape \[3, 1\]/);
    expect(badCoverage).toMatch(/^state-dict-mismatch: .*missing /);
    expect(badNorm).toMatch(/^invalid-option/);
  });
});
