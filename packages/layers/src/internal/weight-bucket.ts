import type { ProcessGroup, Work } from '@fsdp-ts/collectives';
import {
  computeFlatParamLayout,
  type FlatParamLayout,
  type ShardIntersection,
  shardIntersections,
} from '@fsdp-ts/flat-param';
import { Parameter, ReleasableTensor, Storage, TensorView } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import type { LayerVariable } from '@tensorflow/tfjs-layers';
import type { StrategySettings } from '../strategy';
import { backingVariable } from './layer-access';
import type { MemoryMeter } from './memory-meter';

/**
 * Consecutive trainable weights of a model laid out in one flat buffer (flat-param's layout):
 * one collective per bucket per step instead of one per weight. The bucket owns exactly the
 * memory its strategy needs, and the model's tf.Variables live in it.
 *
 * [Note: variables over the flat buffer]
 * Each trainable tf.Variable is assigned a tensor over its range of the bucket's full flat buffer
 * (`toTf`, through a ReleasableTensor: zero copy on the cpu backend, where the variable's memory
 * *is* the flat buffer). So the optimizer steps the weights in place, as PyTorch's does: the
 * Parameters it steps are views of the flat buffer (full-shape under 'replicate', this rank's 1-D
 * shard part otherwise), and after the step the shards are all-gathered into the same buffer.
 * On backends that copy (wasm, tfjs-node) `refreshVariables` puts the new values under the same
 * dataIds (ReleasableTensor release + restore: one copy); on cpu it re-points them (no copy).
 * A variable assigned from outside (model.setWeights, a checkpoint load) gets a new dataId; fit
 * and loadCheckpoint notice it (`adoptVariables`) and copy the values back into the buffer.
 *
 * What stays allocated between steps, per strategy (P weights of the bucket, N ranks):
 * - 'replicate': full buffer 4P, full gradient 4P (all-reduced in place);
 * - 'shard-optimizer': full buffer 4P, full gradient 4P; the optimizer's Parameters are views of
 *   this rank's shard of both (no separate shard copies);
 * - 'shard-gradients': full buffer 4P, gradient shard 4P/N; the full gradient exists only from
 *   the backward to the reduce-scatter;
 * - 'full-shard': parameter shard 4P/N, gradient shard 4P/N; the full buffer exists only while
 *   the layer runs (forward, and its backward: `gather`/`release`), the variables are released
 *   otherwise (ReleasableTensor), the full gradient only from the layer's last weight gradient
 *   to its reduce-scatter (see [Note: full-shard layers]).
 */
export class WeightBucket {
  readonly layout: FlatParamLayout;
  readonly variables: readonly LayerVariable[];
  /** One per variable, in order: what the optimizer steps (see the note). */
  readonly parameters: readonly Parameter[];
  private readonly intersections: readonly ShardIntersection[];
  private readonly full: Storage;
  private readonly fullGradient: Storage;
  private readonly shard: Storage | null;
  private readonly shardGradient: Storage | null;
  private readonly releasable: ReleasableTensor[] = [];
  private pending: Work | null = null;
  /** Full-shard: gradients of a step accumulated in the full gradient, per layer call still running backward. */
  private arrivedGradients = 0;

  constructor(
    variables: readonly LayerVariable[],
    private readonly group: ProcessGroup,
    private readonly settings: StrategySettings,
    private readonly meter: MemoryMeter,
  ) {
    this.variables = variables;
    this.layout = computeFlatParamLayout(
      variables.map((variable) => ({ names: [variable.name], shape: [...backingVariable(variable).shape] })),
      { dtype: 'float32', worldSize: group.size },
    );
    this.intersections = shardIntersections(this.layout, group.rank);
    const { paddedNumel, shardNumel } = this.layout;
    const shared = { shared: true };
    this.full = Storage.allocate('float32', paddedNumel, shared);
    this.meter.allocate(this.full.byteLength);
    this.fullGradient = Storage.allocate('float32', paddedNumel, shared);
    this.shard = settings.shardParameters ? Storage.allocate('float32', shardNumel, shared) : null;
    this.shardGradient =
      settings.gradientReduction === 'reduce-scatter'
        ? Storage.allocate('float32', shardNumel, shared)
        : null;
    if (this.shard !== null) this.meter.allocate(this.shard.byteLength);
    if (this.shardGradient !== null) this.meter.allocate(this.shardGradient.byteLength);
    this.parameters = this.layout.parameters.map((_entry, index) => {
      const parameter = new Parameter(this.fullView(index), { name: variables[index]!.name });
      this.pointParameter(parameter, index);
      return parameter;
    });
    this.readVariables();
    variables.forEach((variable, index) => {
      const releasable = new ReleasableTensor(this.fullView(index));
      backingVariable(variable).assign(releasable.tensor);
      this.releasable.push(releasable);
    });
    if (settings.keepUnshardedGradient) this.meter.allocate(this.fullGradient.byteLength);
    else this.fullGradient.free();
  }

  /** Elements of the padded flat buffer (all ranks' shards). */
  get paddedNumel(): number {
    return this.layout.paddedNumel;
  }

  /** Trainable elements (unpadded). */
  get numel(): number {
    return this.layout.parameters.reduce((sum, entry) => sum + entry.numel, 0);
  }

  /**
   * After something assigned the variables from outside (model.setWeights, a checkpoint load):
   * copies their values into the buffer (and the shard) and makes them views of it again.
   * The full buffer must be resident (idle trainer). Returns whether anything was adopted.
   */
  adoptVariables(): boolean {
    const moved = this.variables.some(
      (variable, index) => backingVariable(variable).dataId !== this.releasable[index]!.tensor.dataId,
    );
    if (!moved) return false;
    this.readVariables();
    this.variables.forEach((variable, index) => {
      const releasable = new ReleasableTensor(this.fullView(index));
      backingVariable(variable).assign(releasable.tensor);
      this.releasable[index] = releasable;
    });
    return true;
  }

  /** The rank's shard of the full buffer copied into the shard buffer (full-shard). */
  private copyShardFromFull(): void {
    if (this.shard === null) return;
    const start = this.group.rank * this.layout.shardNumel;
    (this.shard.array() as Float32Array).set(
      (this.full.array() as Float32Array).subarray(start, start + this.layout.shardNumel),
    );
  }

  // ---- replicate / shard-optimizer / shard-gradients: gradients from tf.variableGrads ----

  loadGradients(gradients: ReadonlyMap<LayerVariable, tf.Tensor>): void {
    const flat = this.allocateFullGradient();
    flat.fill(0);
    this.layout.parameters.forEach((entry, index) => {
      const gradient = gradients.get(this.variables[index]!);
      if (gradient !== undefined) flat.set(gradient.dataSync() as Float32Array, entry.offset);
    });
  }

  /** Overlapped reduction: a zeroed full gradient for the taps to add into (see [Note: reductions overlapped with backward]). */
  beginGradients(): void {
    this.allocateFullGradient().fill(0);
    this.arrivedGradients = 0;
  }

  /** All-reduce (sum) of the full gradient, or reduce-scatter (sum) into the gradient shard. */
  startReduction(): void {
    const flat = this.fullGradient.array() as Float32Array;
    if (this.shardGradient === null) {
      if (this.group.size > 1) this.pending = this.group.allReduce(flat, { op: 'sum' });
      return;
    }
    const shard = this.shardGradient.array() as Float32Array;
    if (this.group.size > 1) this.pending = this.group.reduceScatter(shard, flat, { op: 'sum' });
    else shard.set(flat.subarray(0, this.layout.shardNumel));
  }

  finishReduction(): void {
    this.pending?.wait();
    this.pending = null;
    if (!this.settings.keepUnshardedGradient) this.freeFullGradient();
  }

  /** After the optimizer stepped: all-gathers the shards (sharded optimizer) and refreshes the variables. */
  writeBack(): void {
    if (this.settings.shardParameters) return;
    if (this.settings.optimizerOnShard) {
      const full = this.full.array() as Float32Array;
      const start = this.group.rank * this.layout.shardNumel;
      // In place: the input is this rank's block of the output, which the collectives recognise
      // from the views ([Note: in-place all-gather and reduce-scatter] in @fsdp-ts/collectives).
      const input = full.subarray(start, start + this.layout.shardNumel);
      if (this.group.size > 1) this.group.allGather(full, input).wait();
    }
    this.refreshVariables();
  }

  // ---- full-shard: the layer's weights gathered while it runs ----

  /** Gathers the full buffer from the shards and puts it under the released variables. Idempotent. */
  gather(): void {
    if (this.full.isAllocated) return;
    this.full.allocate();
    this.meter.allocate(this.full.byteLength);
    const full = this.full.array() as Float32Array;
    const shard = this.shard!.array() as Float32Array;
    if (this.group.size > 1) this.group.allGather(full, shard).wait();
    else full.set(shard);
    this.releasable.forEach((releasable, index) => {
      if (releasable.state === 'released') releasable.restore(this.fullView(index));
    });
  }

  /** Frees the full buffer and the variables' memory behind it (they stay valid, empty, objects). Idempotent. */
  release(): void {
    if (!this.full.isAllocated) return;
    for (const releasable of this.releasable) releasable.release();
    this.full.free();
    this.meter.free(this.full.byteLength);
  }

  /** One weight's whole gradient from a tap, added into the full gradient (full-shard, overlapped reduction). */
  addGradient(index: number, gradient: tf.Tensor): void {
    const flat = this.allocateFullGradient();
    const offset = this.layout.parameters[index]!.offset;
    const values = gradient.dataSync() as Float32Array;
    for (let element = 0; element < values.length; element++) flat[offset + element]! += values[element]!;
    this.arrivedGradients++;
  }

  /** Full-shard: reduce-scatters the accumulated full gradient (zeros if none arrived) and frees it. */
  reduceGradients(): void {
    this.allocateFullGradient();
    this.startReduction();
    this.finishReduction();
    this.arrivedGradients = 0;
  }

  get hasPendingGradients(): boolean {
    return this.arrivedGradients > 0;
  }

  // ---- shared ----

  /** The part of each parameter this rank's optimizer steps: its shard intersection, or all of it. */
  optimizerPieces(): { offsetInParam: number; length: number }[] {
    return this.layout.parameters.map((entry, index) =>
      this.settings.optimizerOnShard
        ? {
            offsetInParam: this.intersections[index]!.offsetInParam,
            length: this.intersections[index]!.length,
          }
        : { offsetInParam: 0, length: entry.numel },
    );
  }

  /** Full-shard, idle trainer: makes the model's variables whole again (gathered) or releases them. */
  setResident(resident: boolean): void {
    if (!this.settings.shardParameters) return;
    if (resident) this.gather();
    else {
      this.copyShardFromFull();
      this.release();
    }
  }

  /**
   * Checkpoints (idle trainer: the full buffer is resident under every strategy): the live part of
   * the full buffer a checkpoint reads or writes, this rank's slice `[rank × shardNumel, +shardNumel)`
   * or, with `whole`, every element of the weights (`totalNumel`, world size 1).
   */
  checkpointData(whole: boolean): Float32Array {
    const full = this.full.array() as Float32Array;
    if (whole) return full.subarray(0, this.layout.totalNumel);
    const start = this.group.rank * this.layout.shardNumel;
    return full.subarray(start, start + this.layout.shardNumel);
  }

  /**
   * After a checkpoint load wrote into `checkpointData(whole)`: all-gathers the full buffer when
   * only this rank's slice was written, then updates the shard and the variables.
   */
  afterCheckpointLoad(whole: boolean): void {
    if (!whole && this.group.size > 1) {
      const full = this.full.array() as Float32Array;
      const start = this.group.rank * this.layout.shardNumel;
      this.group.allGather(full, full.slice(start, start + this.layout.shardNumel)).wait();
    }
    this.copyShardFromFull();
    this.refreshVariables();
  }

  /** Bytes of the trainable weights' memory not in the bucket's buffers (backends that copy, e.g. wasm). */
  variableCopyBytes(): number {
    if (!this.full.isAllocated) return 0;
    return this.variables.reduce((sum, variable, index) => {
      const shares = sharesMemory(backingVariable(variable), this.fullView(index));
      return sum + (shares ? 0 : backingVariable(variable).size * 4);
    }, 0);
  }

  private readVariables(): void {
    const full = this.full.array() as Float32Array;
    this.layout.parameters.forEach((entry, index) => {
      full.set(backingVariable(this.variables[index]!).dataSync() as Float32Array, entry.offset);
    });
    this.copyShardFromFull();
  }

  private refreshVariables(): void {
    this.releasable.forEach((releasable, index) => {
      releasable.release();
      releasable.restore(this.fullView(index));
    });
  }

  private allocateFullGradient(): Float32Array {
    if (!this.fullGradient.isAllocated) {
      this.fullGradient.allocate();
      this.meter.allocate(this.fullGradient.byteLength);
    }
    return this.fullGradient.array() as Float32Array;
  }

  private freeFullGradient(): void {
    if (!this.fullGradient.isAllocated) return;
    this.fullGradient.free();
    this.meter.free(this.fullGradient.byteLength);
  }

  private fullView(index: number): TensorView {
    const entry = this.layout.parameters[index]!;
    return new TensorView(this.full, entry.offset, [...entry.shape]);
  }

  /** See the note: full-shape views of the full buffers, or 1-D views of this rank's shard part. */
  private pointParameter(parameter: Parameter, index: number): void {
    const entry = this.layout.parameters[index]!;
    if (!this.settings.optimizerOnShard) {
      parameter.data = new TensorView(this.full, entry.offset, [...entry.shape]);
      parameter.grad = new TensorView(this.fullGradient, entry.offset, [...entry.shape]);
      return;
    }
    const { offsetInShard, length } = this.intersections[index]!;
    const shardStart = this.group.rank * this.layout.shardNumel;
    parameter.data =
      this.shard === null
        ? new TensorView(this.full, shardStart + offsetInShard, [length])
        : new TensorView(this.shard, offsetInShard, [length]);
    parameter.grad =
      this.shardGradient === null
        ? new TensorView(this.fullGradient, shardStart + offsetInShard, [length])
        : new TensorView(this.shardGradient, offsetInShard, [length]);
  }
}

/**
 * Whether a tfjs tensor's backend memory is the view's memory (the cpu backend's zero copy):
 * tfjs-backend-cpu keeps `{ values }` per dataId in `backend.data`; other backends answer false.
 */
function sharesMemory(tensor: tf.Tensor, view: TensorView): boolean {
  const backend = tf.backend() as unknown as {
    data?: { get?(dataId: object): { values?: unknown } | undefined };
  };
  const values = backend.data?.get?.(tensor.dataId)?.values;
  if (!ArrayBuffer.isView(values)) return false;
  const array = view.typedArray();
  return values.buffer === array.buffer && values.byteOffset === array.byteOffset;
}
