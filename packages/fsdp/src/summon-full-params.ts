import type { OptionKeys } from '@fsdp-ts/errors';
import { FsdpError } from './errors';
import type { FullyShardedDataParallel } from './fully-sharded-data-parallel';
import { checkFsdpOptionKeys } from './internal/check-option-keys';
import type { FsdpUnit } from './internal/fsdp-unit';
import { fsdpRuntime } from './internal/wrapper-runtime';

/** Options of summonFullParams. */
export interface SummonOptions {
  /** Copy this rank's part of the (edited) full parameters back into its shard on exit. Default true. */
  writeback?: boolean;
  /** Only rank 0 sees full parameters; the other ranks keep their shards. Needs writeback: false. */
  rank0Only?: boolean;
  /** Also gather the sharded gradients: `grad` is full-shape inside (null for frozen ones). */
  withGrads?: boolean;
}

/** The keys of SummonOptions ([Note: option keys] in @fsdp-ts/errors). */
const summonOptionKeys = {
  writeback: true,
  rank0Only: true,
  withGrads: true,
} as const satisfies OptionKeys<SummonOptions>;

/**
 * [Note: summoned parameters]
 * Collective: every rank all-gathers every unit in float32 (even with mixedPrecision, so a
 * writeback never rounds the float32 masters) and points every Parameter at its full-shape view,
 * then runs `fn`. On exit (also when `fn` throws; an async `fn` when it settles) each rank copies
 * its part of the full buffers back into its shard when `writeback` (no communication: every
 * rank holds the same full values, so edits made identically on every rank stay consistent) and
 * reshards. Peak memory is the whole model gathered at once. Calls inside forward, backward or
 * another summonFullParams are rejected with FsdpError('wrong-state'); the wrapper's forward and
 * backward are rejected inside `fn`. The wrapped module's own forward (`model.module.forward`)
 * runs inside `fn` on the summoned parameters and leaves them gathered, so edits made around it
 * are written back; on a rank that summoned nothing (rank0Only) it is rejected with 'wrong-state'.
 * Under 'no-shard' the parameters already are full and nothing moves; without `writeback` their values are restored from a copy on exit (gradients are not).
 */
export function summonFullParams<T>(
  model: FullyShardedDataParallel,
  fn: () => T,
  options: SummonOptions = {},
): T {
  checkFsdpOptionKeys('summonFullParams', options, summonOptionKeys, {
    offload_to_cpu: 'no equivalent: full parameters are gathered in this process; remove it',
    rank0_only: "PyTorch's rank0_only is rank0Only here",
    with_grads: "PyTorch's with_grads is withGrads here",
    recurse: 'no equivalent: every unit is summoned; remove it',
  });
  const writeback = options.writeback ?? true;
  const rank0Only = options.rank0Only ?? false;
  const withGrads = options.withGrads ?? false;
  model.expectIdle('summonFullParams()');
  if (rank0Only && writeback) {
    throw new FsdpError(
      'summonFullParams: rank0Only cannot write back (the other ranks see no full values).',
      {
        code: 'invalid-option',
        rank: model.group.rank,
        expected: '{ rank0Only: true, writeback: false }',
        actual: { rank0Only, writeback },
        fix: 'pass writeback: false with rank0Only: true, or drop rank0Only.',
      },
    );
  }
  const { units, training } = model[fsdpRuntime];
  const gathered = units.filter((unit) => unit.state === 'sharded');
  const pending = withGrads ? units.find((unit) => unit.reduction.holdsUnreducedGradients) : undefined;
  if (pending !== undefined) {
    throw new FsdpError('summonFullParams withGrads during gradient accumulation (noSync).', {
      code: 'wrong-state',
      rank: model.group.rank,
      expected: 'reduced gradients',
      actual: `unreduced accumulated gradients in ${pending.label}`,
      fix: 'run a synchronised backward first, or call summonFullParams without withGrads.',
    });
  }
  training.beginSummon();
  // no-shard: the Parameters are the live full buffers; without writeback, restore a snapshot.
  const snapshots = writeback ? [] : units.filter((unit) => unit.state === 'unsharded').flatMap(snapshot);
  let held: FsdpUnit[] = [];
  try {
    for (const unit of gathered) gatherUnit(model, unit, withGrads);
    held = gathered;
    if (rank0Only && model.group.rank !== 0) {
      for (const unit of gathered) release(unit, false, withGrads);
      held = [];
    }
  } catch (error) {
    training.endSummon();
    throw error;
  }
  const exit = (completed: boolean) => {
    try {
      for (const unit of held) release(unit, completed && writeback, withGrads);
      for (const [target, saved] of snapshots) target.set(saved);
    } finally {
      training.endSummon();
    }
  };
  let result: T;
  try {
    result = fn();
  } catch (error) {
    exit(false);
    throw error;
  }
  if (result instanceof Promise) {
    return result.then(
      (value) => {
        exit(true);
        return value;
      },
      (error: unknown) => {
        exit(false);
        throw error;
      },
    ) as T;
  }
  exit(true);
  return result;
}

function gatherUnit(model: FullyShardedDataParallel, unit: FsdpUnit, withGrads: boolean): void {
  const group = model.group;
  unit.startUnshard(group, 'float32');
  const works = [];
  if (withGrads) {
    for (const handle of unit.handles) {
      if (!handle.parameters.some((parameter) => parameter.requiresGrad)) continue;
      const shard = handle.shardedGradBuffer().typedArray() as Float32Array;
      handle.intersections.forEach((intersection, index) => {
        if (handle.isGradientPresent(index)) return;
        shard.fill(0, intersection.offsetInShard, intersection.offsetInShard + intersection.length);
      });
      const full = handle.unshardedGradBuffer().typedArray() as Float32Array;
      works.push(group.allGather(full, shard));
    }
  }
  for (const work of works) work.wait();
  unit.finishUnshard(group, 'float32');
  if (!withGrads) return;
  // A parameter without a gradient (e.g. after optimizer.zeroGrad()) has grad null, as unsharded.
  for (const handle of unit.handles) {
    handle.parameters.forEach((parameter, index) => {
      if (!handle.isGradientPresent(index)) parameter.grad = null;
    });
  }
}

function release(unit: FsdpUnit, writeback: boolean, withGrads: boolean): void {
  for (const handle of unit.handles) {
    if (writeback) handle.writeback();
    if (!withGrads || !handle.hasUnshardedGrad) continue;
    if (writeback) {
      const start = handle.rank * handle.layout.shardNumel;
      const full = handle.unshardedGradBuffer().typedArray() as Float32Array;
      (handle.shardedGradBuffer().typedArray() as Float32Array).set(
        full.subarray(start, start + handle.layout.shardNumel),
      );
    }
    handle.freeUnshardedGrad();
  }
  unit.reshard();
}

/** Copies of an already-unsharded (no-shard) unit's flat buffers, paired with their targets. */
function snapshot(unit: FsdpUnit): [Float32Array, Float32Array][] {
  return unit.handles.map((handle) => {
    const target = handle.unshardedBuffer().typedArray() as Float32Array;
    return [target, target.slice()];
  });
}
