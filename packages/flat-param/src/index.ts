/**
 * Flat parameters whose original Parameters stay alive as views.
 *
 * @packageDocumentation
 * @document ../README.md
 * @module @fsdp-ts/flat-param
 */

// Flatten parameters into one buffer, shard it, and switch their views.

export {
  FlatParamHandle,
  type FlatParamHandleOptions,
  type FlatParamState,
  MAX_FLAT_NUMEL,
} from './flat-param-handle';

// Compute a layout without memory: offsets, padding, each rank's part of each parameter.

export {
  computeFlatParamLayout,
  FLAT_PARAM_LAYOUT_VERSION,
  type FlatParamLayout,
  type LayoutOptions,
  type LayoutParameter,
  type LayoutParameterSpec,
  parameterIndex,
  type ShardIntersection,
  shardIntersection,
  shardIntersections,
  withWorldSize,
} from './layout';
export { locateParameterRange, type ShardPiece } from './locate';

// Read a layout back (as checkpoints record it).

export { type FlatParamMetadata, parseFlatParamMetadata } from './metadata';

// Errors.

export { FlatParamError, type FlatParamErrorCode, type FlatParamErrorDetails } from './errors';
