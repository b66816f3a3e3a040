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
  /**
   * allGather / reduceScatter in place ([Note: in-place all-gather and reduce-scatter]): the
   * input is this rank's block of the output (allGather), or the output this rank's block of
   * the input (reduceScatter). The case also runs the op out of place on the same inputs and
   * requires the two results to be equal byte for byte.
   */
  inPlace: boolean;
  /**
   * allGather / reduceScatter whose input and output overlap without being in place: every
   * rank must refuse it with a typed 'invalid-argument' error before issuing anything.
   */
  overlap: boolean;
  seed: number;
}

const ONE_MIB = 1 << 20;

function elementsOf(bytes: number, dtype: CollectiveDtype): number {
  return bytes / (dtype === 'bfloat16' ? 2 : 4);
}

/**
 * The suite for a world size: every op x dtype x size (0, 1, odd, 1 MiB), all-gather and
 * reduce-scatter in place too (and refused when input and output merely overlap), the other reductions
 * on the odd size (and a larger odd size for bfloat16 all-reduce), with `wire` every float32 op with bfloat16 on the wire (0, 1, odd, 1 MiB),
 * and, when `huge`, a 64 MiB float32 all-reduce (also with bfloat16 on the wire, with `wire`) and reduce-scatter.
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
      inPlace: false,
      overlap: false,
      seed: seed++,
      ...fields,
    };
    full.name = `${full.kind} ${full.dtype}${full.wireDtype === 'bfloat16' ? ' wire bf16' : ''} n=${full.count} ${full.kind === 'allReduce' || full.kind === 'reduceScatter' ? full.reduceOp : ''}${full.kind === 'broadcast' ? ` root ${full.root}` : ''}${full.unshared ? ' unshared' : ''}${full.arena ? ' arena' : ''}${full.awaitIt ? ' await' : ''}${full.inPlace ? ' in place' : ''}${full.overlap ? ' overlapping' : ''}`;
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
  // In place ([Note: in-place all-gather and reduce-scatter]): every size, plain, unshared
  // (staged) and arena buffers (across the in-place block), every reduction; each against the
  // same op out of place on the same inputs, byte for byte.
  for (const dtype of dtypes) {
    for (const count of [0, 1, 1031, elementsOf(ONE_MIB, dtype)]) {
      add({ kind: 'allGather', dtype, count, inPlace: true, unshared: count === 1031 });
      add({ kind: 'reduceScatter', dtype, count, inPlace: true, unshared: count === 1031 });
    }
    for (const count of [1, 1031, 65_539]) {
      add({ kind: 'allGather', dtype, count, inPlace: true, arena: true });
      add({ kind: 'reduceScatter', dtype, count, inPlace: true, arena: true });
    }
    for (const reduceOp of dtype === 'int32' ? (['max', 'min'] as const) : (['avg', 'max', 'min'] as const)) {
      add({ kind: 'reduceScatter', dtype, count: 517, reduceOp, inPlace: true });
      add({ kind: 'reduceScatter', dtype, count: 65_539, reduceOp, inPlace: true, arena: true });
    }
  }
  // Overlapping but not in place: refused on every rank, on shared and unshared buffers.
  for (const kind of ['allGather', 'reduceScatter'] as const) {
    add({ kind, dtype: 'float32', count: 1031, overlap: true });
    add({ kind, dtype: 'int32', count: 7, overlap: true, unshared: true });
    add({ kind, dtype: 'float32', count: 1031, overlap: true, arena: true });
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
      add({ kind: 'allGather', dtype: 'float32', count, wireDtype: 'bfloat16', inPlace: true });
      add({ kind: 'reduceScatter', dtype: 'float32', count, wireDtype: 'bfloat16', inPlace: true });
    }
  }
  if (options.huge) {
    add({ kind: 'allReduce', dtype: 'float32', count: (64 * ONE_MIB) / 4 });
    add({ kind: 'allReduce', dtype: 'float32', count: (64 * ONE_MIB) / 4, arena: true });
    // Out of place, a 64 MiB input: the tcp engine's partial sums are more than the work it keeps
    // between ops (KEPT_WORK_BYTES), so it is dropped when the engine idles ([Note: work arrays dropped when idle]).
    for (const reduceOp of ['sum', 'max'] as const)
      add({
        kind: 'reduceScatter',
        dtype: 'float32',
        count: Math.floor((64 * ONE_MIB) / 4 / size),
        reduceOp,
      });
    // A large in-place pair (16 MiB per rank's full buffer at W=2), plain and arena.
    for (const arena of [false, true]) {
      const count = Math.floor((16 * ONE_MIB) / 4 / size);
      add({ kind: 'allGather', dtype: 'float32', count, inPlace: true, arena });
      add({ kind: 'reduceScatter', dtype: 'float32', count, inPlace: true, arena });
    }
    if (options.wire)
      add({ kind: 'allReduce', dtype: 'float32', count: (64 * ONE_MIB) / 4, wireDtype: 'bfloat16' });
  }
  return cases;
}
