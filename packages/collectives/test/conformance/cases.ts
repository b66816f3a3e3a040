import type { CollectiveDtype, CollectiveKind, ReduceOp } from '../../src/index.js';

/** One op of the conformance suite; every rank of a group runs the same list in order. */
export interface ConformanceCase {
  name: string;
  kind: CollectiveKind | 'sendRecv';
  dtype: CollectiveDtype;
  /** Elements per rank (see OpMessage.count). */
  count: number;
  reduceOp: ReduceOp;
  root: number;
  wireDtype: 'float32' | 'bfloat16';
  /** Pass ordinary (non-shared) buffers, exercising the staging copy. */
  unshared: boolean;
  /** Allocate with allocateShared(..., { arena: true }) ([Note: shm arena]: shm reduces in place). */
  arena: boolean;
  /** Await the Work instead of wait(). */
  awaitIt: boolean;
  seed: number;
}

const ONE_MIB = 1 << 20;

function elementsOf(bytes: number, dtype: CollectiveDtype): number {
  return bytes / (dtype === 'bfloat16' ? 2 : 4);
}

/**
 * The suite for a world size: every op x dtype x size (0, 1, odd, 1 MiB), the other reductions
 * on the odd size (and a larger odd size for bfloat16 all-reduce), with `wire` every float32 op with bfloat16 on the wire (0, 1, odd, 1 MiB),
 * and, when `huge`, a 64 MiB float32 all-reduce (also with bfloat16 on the wire, with `wire`).
 */
export function conformanceCases(size: number, options: { huge: boolean; wire: boolean }): ConformanceCase[] {
  const cases: ConformanceCase[] = [];
  let seed = 1;
  const add = (
    fields: Partial<ConformanceCase> & Pick<ConformanceCase, 'kind' | 'dtype' | 'count'>,
  ): void => {
    const full: ConformanceCase = {
      name: '',
      reduceOp: 'sum',
      root: 0,
      wireDtype: 'float32',
      unshared: false,
      arena: false,
      awaitIt: false,
      seed: seed++,
      ...fields,
    };
    full.name = `${full.kind} ${full.dtype}${full.wireDtype === 'bfloat16' ? ' wire bf16' : ''} n=${full.count} ${full.kind === 'allReduce' || full.kind === 'reduceScatter' ? full.reduceOp : ''}${full.kind === 'broadcast' ? ` root ${full.root}` : ''}${full.unshared ? ' unshared' : ''}${full.arena ? ' arena' : ''}${full.awaitIt ? ' await' : ''}`;
    cases.push(full);
  };
  const dtypes: CollectiveDtype[] = ['float32', 'int32', 'bfloat16'];
  for (const dtype of dtypes) {
    const counts = [0, 1, 1031, elementsOf(ONE_MIB, dtype)];
    for (const count of counts) {
      const odd = count === 1031;
      add({ kind: 'allReduce', dtype, count, unshared: odd, awaitIt: count === 1 });
      add({ kind: 'allGather', dtype, count, unshared: odd });
      add({ kind: 'reduceScatter', dtype, count, awaitIt: odd });
      add({ kind: 'broadcast', dtype, count, root: size - 1 });
      add({ kind: 'sendRecv', dtype, count });
    }
    const reductions: ReduceOp[] = dtype === 'int32' ? ['max', 'min'] : ['avg', 'max', 'min'];
    for (const reduceOp of reductions) {
      add({ kind: 'allReduce', dtype, count: 1031, reduceOp });
      add({ kind: 'reduceScatter', dtype, count: 517, reduceOp });
      // Above tcp's direct all-reduce: a bfloat16 buffer's ring, whose results land as bfloat16
      // in place, with each reduction.
      if (dtype === 'bfloat16') add({ kind: 'allReduce', dtype, count: 20_011, reduceOp });
    }
  }
  // Buffers in the thread ranks' arena: every op (the reductions in place, with vector tails of
  // 1-3 elements), every reduction, and sizes across the in-place block (32 Ki elements).
  for (const dtype of dtypes) {
    for (const count of [1, 1031, 65_539]) {
      add({ kind: 'allReduce', dtype, count, arena: true });
      add({ kind: 'reduceScatter', dtype, count, arena: true });
      add({ kind: 'allGather', dtype, count, arena: true });
      add({ kind: 'broadcast', dtype, count, root: size - 1, arena: true });
    }
    for (const reduceOp of dtype === 'int32' ? (['max', 'min'] as const) : (['avg', 'max', 'min'] as const)) {
      add({ kind: 'allReduce', dtype, count: 1031, reduceOp, arena: true });
      add({ kind: 'reduceScatter', dtype, count: 517, reduceOp, arena: true });
    }
  }
  add({ kind: 'barrier', dtype: 'int32', count: 0 });
  if (options.wire) {
    for (const count of [0, 1, 1031, 1 << 18]) {
      add({ kind: 'allReduce', dtype: 'float32', count, wireDtype: 'bfloat16' });
      add({ kind: 'allReduce', dtype: 'float32', count, wireDtype: 'bfloat16', reduceOp: 'avg' });
      add({ kind: 'allGather', dtype: 'float32', count, wireDtype: 'bfloat16' });
      add({ kind: 'reduceScatter', dtype: 'float32', count, wireDtype: 'bfloat16' });
      if (count === 1031)
        add({ kind: 'reduceScatter', dtype: 'float32', count, wireDtype: 'bfloat16', reduceOp: 'max' });
      add({ kind: 'broadcast', dtype: 'float32', count, wireDtype: 'bfloat16', root: size - 1 });
    }
  }
  if (options.huge) {
    add({ kind: 'allReduce', dtype: 'float32', count: (64 * ONE_MIB) / 4 });
    add({ kind: 'allReduce', dtype: 'float32', count: (64 * ONE_MIB) / 4, arena: true });
    if (options.wire)
      add({ kind: 'allReduce', dtype: 'float32', count: (64 * ONE_MIB) / 4, wireDtype: 'bfloat16' });
  }
  return cases;
}
