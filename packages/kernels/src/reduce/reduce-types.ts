/**
 * The element types and operations the reduction kernels take: the same unions as
 * @fsdp-ts/collectives' `ReduceOp`, `CollectiveDtype` and `CollectiveBuffer` (which it declares
 * for its users, and which are assignable to these), kept here so the kernels depend on no
 * package above them.
 */

/** A reduction: `avg` accumulates as `sum` and divides once at the end. */
export type ReduceOp = 'sum' | 'avg' | 'max' | 'min';

/** The dtypes a reduction runs on; bfloat16 travels as its 16 bits in a Uint16Array. */
export type CollectiveDtype = 'float32' | 'int32' | 'bfloat16';

/** A flat buffer of one of those dtypes. */
export type CollectiveBuffer = Float32Array | Int32Array | Uint16Array;
