/**
 * Flat parameters whose original Parameters stay alive as views.
 *
 * @packageDocumentation
 * @document ../README.md
 * @module @fsdp-ts/flat-param
 */
export { FlatParamError, type FlatParamErrorCode, type FlatParamErrorDetails } from './errors';
export {
  FlatParamHandle,
  type FlatParamHandleOptions,
  type FlatParamState,
  MAX_FLAT_NUMEL,
} from './flat-param-handle';
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
export { type FlatParamMetadata, parseFlatParamMetadata } from './metadata';
