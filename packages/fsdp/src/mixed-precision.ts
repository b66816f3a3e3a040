import type { OptionKeys } from '@fsdp-ts/errors';
import { FsdpError } from './errors';
import { checkFsdpOptionKeys } from './internal/check-option-keys';

/** The dtypes FSDP can communicate in. */
export type CommunicationDtype = 'float32' | 'bfloat16';

/**
 * Mixed precision for communication.
 *
 * [Note: mixed precision]
 * Shards (the master weights the optimizer updates) and sharded gradients stay float32.
 * - `paramDtype: 'bfloat16'`: each unshard converts this rank's shard to bfloat16, all-gathers
 *   bfloat16 words (half the bytes of a float32 all-gather) and widens them into the float32
 *   unsharded buffer the Parameters view. Compute therefore runs in float32 on bfloat16-rounded
 *   weights (tfjs CPU/WASM have no bfloat16 kernels), and writes into the gathered buffer are not
 *   written back (summonFullParams gathers in float32 for that reason).
 * - `reduceDtype: 'bfloat16'`: the unsharded gradient is rounded to bfloat16, reduce-scattered
 *   (all-reduced under no-shard) in bfloat16, and widened into the float32 sharded gradient.
 *   The collectives accumulate in float32 and round once.
 * Under 'no-shard' parameters are never gathered, so only `reduceDtype` applies.
 */
export interface MixedPrecision {
  /** dtype of the parameter all-gathers. Default 'float32'. */
  paramDtype?: CommunicationDtype;
  /** dtype of the gradient reductions. Default: `paramDtype`. */
  reduceDtype?: CommunicationDtype;
}

const dtypes: readonly CommunicationDtype[] = ['float32', 'bfloat16'];

/** The keys of MixedPrecision ([Note: option keys] in @fsdp-ts/errors). */
export const mixedPrecisionKeys = {
  paramDtype: true,
  reduceDtype: true,
} as const satisfies OptionKeys<MixedPrecision>;

/** Throws FsdpError('unknown-option') for a key MixedPrecision does not have (PyTorch's MixedPrecision fields named). */
export function checkMixedPrecisionKeys(mixedPrecision: MixedPrecision | undefined): void {
  checkFsdpOptionKeys('FullyShardedDataParallel mixedPrecision', mixedPrecision, mixedPrecisionKeys, {
    param_dtype: "PyTorch's param_dtype is paramDtype here: 'bfloat16' or 'float32'",
    reduce_dtype: "PyTorch's reduce_dtype is reduceDtype here: 'bfloat16' or 'float32'",
    buffer_dtype:
      'no equivalent: buffers and compute stay float32; mixedPrecision sets communication dtypes only',
    keep_low_precision_grads: 'no equivalent: sharded gradients are always float32',
    cast_forward_inputs: 'no equivalent: compute stays float32, inputs are not cast',
    cast_root_forward_inputs: 'no equivalent: compute stays float32, inputs are not cast',
    output_dtype: 'no equivalent: compute stays float32',
  });
}

export function resolveMixedPrecision(
  mixedPrecision: MixedPrecision | undefined,
): Required<MixedPrecision> | null {
  if (mixedPrecision === undefined) return null;
  const paramDtype = mixedPrecision.paramDtype ?? 'float32';
  const reduceDtype = mixedPrecision.reduceDtype ?? paramDtype;
  for (const [field, value] of [
    ['paramDtype', paramDtype],
    ['reduceDtype', reduceDtype],
  ] as const) {
    if (!dtypes.includes(value)) {
      throw new FsdpError(`mixedPrecision.${field} ${JSON.stringify(value)} is not supported.`, {
        code: 'invalid-option',
        expected: dtypes,
        actual: value,
        fix: `use 'bfloat16' or 'float32' for ${field}.`,
      });
    }
  }
  if (paramDtype === 'float32' && reduceDtype === 'float32') return null;
  return { paramDtype, reduceDtype };
}
