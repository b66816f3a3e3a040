import { type Parameter, type Storage, TensorView } from '@fsdp-ts/tensor';
import type { FlatParamLayout, ShardIntersection } from '../layout';

/**
 * Every view a handle ever points a Parameter at, built once at creation.
 *
 * [Note: O(1) switching]
 * Views hold a Storage object, not its memory, and the handle keeps its four Storage objects for
 * life (freeing and re-allocating memory in place). So the views built here stay valid across
 * every free/allocate cycle, and switching a unit between sharded and unsharded is one setter
 * call per Parameter and view: no copy, no allocation, no shape arithmetic.
 */
export interface ViewSet {
  /** Original shape, into the unsharded flat parameter. */
  readonly unshardedData: readonly TensorView[];
  /** 1-D, this rank's part (possibly empty), into the sharded flat parameter. */
  readonly shardedData: readonly TensorView[];
  /** As unshardedData, into the unsharded gradient; null for frozen parameters. */
  readonly unshardedGrad: readonly (TensorView | null)[];
  /** As shardedData, into the sharded gradient; null for frozen parameters. */
  readonly shardedGrad: readonly (TensorView | null)[];
}

export interface HandleStorages {
  readonly sharded: Storage;
  readonly unsharded: Storage;
  readonly shardedGrad: Storage;
  readonly unshardedGrad: Storage;
}

export function buildViewSet(
  layout: FlatParamLayout,
  parameters: readonly Parameter[],
  intersections: readonly ShardIntersection[],
  storages: HandleStorages,
): ViewSet {
  const unshardedData: TensorView[] = [];
  const shardedData: TensorView[] = [];
  const unshardedGrad: (TensorView | null)[] = [];
  const shardedGrad: (TensorView | null)[] = [];
  layout.parameters.forEach((entry, index) => {
    const shape = parameters[index]!.shape;
    const piece = intersections[index]!;
    unshardedData.push(new TensorView(storages.unsharded, entry.offset, shape));
    shardedData.push(new TensorView(storages.sharded, piece.offsetInShard, [piece.length]));
    unshardedGrad.push(entry.frozen ? null : new TensorView(storages.unshardedGrad, entry.offset, shape));
    shardedGrad.push(
      entry.frozen ? null : new TensorView(storages.shardedGrad, piece.offsetInShard, [piece.length]),
    );
  });
  return { unshardedData, shardedData, unshardedGrad, shardedGrad };
}
