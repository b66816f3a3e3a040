/** The reductions every reducing op accepts. `avg` is the sum divided by the group size. */
export type ReduceOp = 'sum' | 'avg' | 'max' | 'min';

/**
 * Element types a buffer can hold. `bfloat16` lives in a Uint16Array (the upper half of a
 * float32); it is reduced in float32 and rounded to nearest-even once.
 */
export type CollectiveDtype = 'float32' | 'int32' | 'bfloat16';

/**
 * `tcp`: processes (one or several hosts); `shm`: worker threads of one process. Any other name
 * must be registered first (see CONTRIBUTING.md, "Add a collectives backend").
 */
export type Backend = 'tcp' | 'shm' | (string & {});

/** A flat buffer an op reads or writes: Float32Array, Int32Array, or Uint16Array of bfloat16. */
export type CollectiveBuffer = Float32Array | Int32Array | Uint16Array;

/** Options common to every op. */
export interface OpOptions {
  /** Required for Uint16Array buffers, which are only accepted as bfloat16. */
  dtype?: CollectiveDtype;
  /** Milliseconds before the op fails with a CollectiveError (code 'timeout'); group default otherwise. */
  timeoutMs?: number;
}

/** Options of ops that move float32 data over a wire. */
export interface WireOptions {
  /**
   * `bfloat16`: float32 buffers travel as bfloat16 (half the bytes) and are accumulated in
   * float32; every rank, the sender included, ends with values rounded to bfloat16. Ignored by
   * the `shm` backend, which has no wire.
   */
  wireDtype?: 'float32' | 'bfloat16';
}

export interface ReduceOptions extends OpOptions, WireOptions {
  /** Default `sum`. */
  op?: ReduceOp;
}

export interface BroadcastOptions extends OpOptions, WireOptions {
  /** Rank (in this group) whose buffer every rank receives. Default 0. */
  root?: number;
}

/** The name of a collective operation (allReduce, allGather, reduceScatter, …). */
export type CollectiveKind =
  | 'allReduce'
  | 'allGather'
  | 'reduceScatter'
  | 'broadcast'
  | 'barrier'
  | 'send'
  | 'recv';
