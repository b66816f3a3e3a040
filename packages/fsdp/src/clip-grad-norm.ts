import { allocateShared } from '@fsdp-ts/collectives';
import type { Parameter, TensorView } from '@fsdp-ts/tensor';
import { FsdpError } from './errors';
import type { FullyShardedDataParallel } from './fully-sharded-data-parallel';
import { fsdpRuntime } from './internal/wrapper-runtime';

/**
 * [Note: sharded gradient norm]
 * Every element of every managed gradient lives in exactly one rank's shard (the padding is not
 * a gradient), so the total 2-norm is sqrt of the sum over ranks of each rank's local sum of
 * squares, and the ∞-norm the max over ranks of the local max: one all-reduce of a 2-element
 * buffer (the float64 local sum split into a float32 high and low part, so only the float32
 * additions of the all-reduce round) or of one element (max). Under 'hybrid-shard' the replicas hold equal
 * shards, so the reduction runs in the shard group only; under 'no-shard' every rank holds the
 * whole averaged gradient and nothing is communicated. Parameters of ignoredModules count once
 * (shard rank 0's values). Gradients are then scaled in place by maxNorm / (norm + 1e-6) when
 * that is below 1, like torch.nn.utils.clip_grad_norm_.
 */
export function clipGradNorm(model: FullyShardedDataParallel, maxNorm: number, normType = 2): number {
  model.expectIdle('clipGradNorm()');
  if (model[fsdpRuntime].units.some((unit) => unit.reduction.holdsUnreducedGradients)) {
    throw new FsdpError('clipGradNorm() was called while noSync gradients are accumulated but not reduced.', {
      code: 'wrong-state',
      rank: model.group.rank,
      expected: 'reduced gradients (after a synchronised backward)',
      actual: 'gradients accumulated by noSync backwards',
      fix: 'run the last micro-batch backward outside noSync, then clip.',
    });
  }
  if (!(maxNorm >= 0) || (normType !== 2 && normType !== Number.POSITIVE_INFINITY)) {
    throw new FsdpError(`clipGradNorm(${maxNorm}, ${normType}): unsupported arguments.`, {
      code: 'invalid-option',
      rank: model.group.rank,
      expected: 'maxNorm >= 0 and normType 2 or Infinity',
      actual: { maxNorm, normType },
      fix: 'pass a non-negative maxNorm and normType 2 (default) or Infinity.',
    });
  }
  const group = model.group;
  const replicated = !model.options.sharding.shardParameters;
  const local: Float32Array[] = [];
  const counted: Float32Array[] = [];
  for (const parameter of model.parameters()) {
    const grad = gradientArray(parameter);
    if (grad === null) continue;
    local.push(grad);
    const ignored = model.locate(parameter) === undefined;
    if (replicated || !ignored || group.rank === 0) counted.push(grad);
  }
  let norm: number;
  if (normType === 2) {
    let sum = 0;
    for (const grad of counted) for (let index = 0; index < grad.length; index++) sum += grad[index]! ** 2;
    if (!replicated && group.size > 1) {
      const parts = allocateShared(Float32Array, 2);
      parts[0] = sum;
      parts[1] = sum - parts[0]!;
      group.allReduce(parts, { op: 'sum' }).wait();
      sum = parts[0]! + parts[1]!;
    }
    norm = Math.sqrt(sum);
  } else {
    let max = 0;
    for (const grad of counted)
      for (let index = 0; index < grad.length; index++) max = Math.max(max, Math.abs(grad[index]!));
    if (!replicated && group.size > 1) {
      const buffer = allocateShared(Float32Array, 1);
      buffer[0] = max;
      group.allReduce(buffer, { op: 'max' }).wait();
      max = buffer[0]!;
    }
    norm = max;
  }
  const coefficient = maxNorm / (norm + 1e-6);
  if (coefficient < 1) {
    const scale = Math.fround(coefficient);
    for (const grad of local) for (let index = 0; index < grad.length; index++) grad[index]! *= scale;
  }
  return norm;
}

/** The float32 elements of a trainable parameter's gradient (aliasing it), or null. */
function gradientArray(parameter: Parameter): Float32Array | null {
  const grad: TensorView | null = parameter.grad;
  if (!parameter.requiresGrad || grad === null || grad.numel === 0) return null;
  if (grad.dtype !== 'float32' || !grad.isContiguous) {
    throw new FsdpError(
      `clipGradNorm: ${parameter} has a ${grad.dtype} gradient that is not a contiguous float32 view.`,
      {
        code: 'unsupported-model',
        expected: 'contiguous float32 gradients',
        actual: grad.dtype,
        fix: 'keep float32 parameters (FSDP gradients are contiguous float32 views).',
      },
    );
  }
  return grad.typedArray() as Float32Array;
}
