import type { ProcessGroup, Work } from '@fsdp-ts/collectives';
import { FlatParamHandle } from '@fsdp-ts/flat-param';
import { Parameter } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import type { LayerVariable } from '@tensorflow/tfjs-layers';
import type { StrategySettings } from '../strategy';
import { backingVariable } from './layer-access';

/**
 * Consecutive trainable weights of a model flattened into one FlatParamHandle: one collective per
 * bucket per step instead of one per weight. The tfjs variables stay the model's weights; the
 * bucket owns the flat copies the collectives and the optimizer work on, and writes the updated
 * values back into the variables after each step.
 *
 * [Note: one step of a bucket]
 * 1. `loadGradients`: the local gradients (tfjs tensors, loss already scaled by this rank's share
 *    of the global batch) are copied into the unsharded flat gradient.
 * 2. `startReduction`: all-reduce (sum) of the flat gradient, or reduce-scatter (sum) into the
 *    sharded gradient. Summing is averaging: see [Note: loss scaling] in train-step.ts.
 * 3. `finishReduction`: wait; with an optimizer on shards, this rank's part is declared present
 *    in the sharded gradient (copied there after an all-reduce), and the full gradient is freed
 *    when the strategy does not keep it.
 * 4. `beforeStep`: an optimizer on full weights ('replicate') steps the full-shape views of the
 *    unsharded flat parameter, refilled from the variables (they hold the same values). The
 *    optimizer steps every Parameter (full-shape views or 1-D shard views).
 * 5. `writeBack`: with an optimizer on shards, the shards are all-gathered into the unsharded
 *    buffer; then every variable is assigned its new value, as model.fit's optimizer does
 *    (tf.Variable.assign: layer constraints are not applied, as in model.fit), and the unsharded
 *    flat parameter is freed: between steps the variables are the only full copy.
 */
export class WeightBucket {
  readonly handle: FlatParamHandle;
  readonly variables: readonly LayerVariable[];
  private pending: Work | null = null;

  constructor(
    variables: readonly LayerVariable[],
    readonly parameters: readonly Parameter[],
    private readonly group: ProcessGroup,
    private readonly settings: StrategySettings,
  ) {
    this.variables = variables;
    const named = variables.map((variable, index) => [variable.name, parameters[index]!] as const);
    this.handle = FlatParamHandle.create(named, { rank: group.rank, worldSize: group.size });
  }

  static fromVariables(
    variables: readonly LayerVariable[],
    group: ProcessGroup,
    settings: StrategySettings,
  ): WeightBucket {
    const parameters = variables.map((variable) =>
      Parameter.fromArray(variable.read().dataSync() as Float32Array, variable.read().shape, {
        name: variable.name,
      }),
    );
    return new WeightBucket(variables, parameters, group, settings);
  }

  /** Elements of the padded flat buffer (all ranks' shards). */
  get paddedNumel(): number {
    return this.handle.layout.paddedNumel;
  }

  loadGradients(gradients: ReadonlyMap<LayerVariable, tf.Tensor>): void {
    const flat = this.handle.unshardedGradBuffer().typedArray() as Float32Array;
    flat.fill(0);
    this.handle.layout.parameters.forEach((entry, index) => {
      const gradient = gradients.get(this.variables[index]!);
      if (gradient !== undefined) flat.set(gradient.dataSync() as Float32Array, entry.offset);
    });
  }

  startReduction(): void {
    const flat = this.handle.unshardedGradBuffer().typedArray() as Float32Array;
    if (this.group.size === 1) return;
    this.pending =
      this.settings.gradientReduction === 'all-reduce'
        ? this.group.allReduce(flat, { op: 'sum' })
        : this.group.reduceScatter(this.handle.shardedGradBuffer().typedArray() as Float32Array, flat, {
            op: 'sum',
          });
  }

  finishReduction(): void {
    this.pending?.wait();
    this.pending = null;
    if (!this.settings.optimizerOnShard) return;
    const reducedInSharded = this.settings.gradientReduction === 'reduce-scatter' && this.group.size > 1;
    if (!reducedInSharded) {
      const shardNumel = this.handle.layout.shardNumel;
      const start = this.group.rank * shardNumel;
      const full = this.handle.unshardedGradBuffer().typedArray();
      (this.handle.shardedGradBuffer().typedArray() as Float32Array).set(
        full.subarray(start, start + shardNumel),
      );
    }
    if (!this.settings.keepUnshardedGradient) this.handle.freeUnshardedGrad();
    this.handle.setGradientsPresent(true);
  }

  /** Before the optimizer step: see [Note: one step of a bucket], 4. */
  beforeStep(): void {
    if (this.settings.optimizerOnShard) return;
    const flat = this.handle.unshardedBuffer().typedArray() as Float32Array;
    this.handle.layout.parameters.forEach((entry, index) => {
      flat.set(this.variables[index]!.read().dataSync() as Float32Array, entry.offset);
    });
    this.handle.useUnshardedViews();
  }

  /** After the optimizer step: all-gathers the shards (when sharded) and assigns every variable. */
  writeBack(): void {
    if (this.settings.optimizerOnShard) this.gatherShards();
    const flat = this.handle.unshardedBuffer().typedArray() as Float32Array;
    this.handle.layout.parameters.forEach((entry, index) => {
      const variable = backingVariable(this.variables[index]!);
      tf.tidy(() => {
        variable.assign(
          tf.tensor(flat.slice(entry.offset, entry.offset + entry.numel), variable.shape, 'float32'),
        );
      });
    });
    this.releaseStepViews();
  }

  /** Back to the between-steps state: sharded views, no unsharded flat parameter. */
  releaseStepViews(): void {
    if (this.handle.state === 'unsharded') this.handle.useShardedViews();
    this.handle.freeUnsharded();
  }

  /** The part of each parameter this rank's optimizer steps: its shard intersection, or all of it. */
  optimizerPieces(): { offsetInParam: number; length: number }[] {
    return this.handle.layout.parameters.map((entry, index) =>
      this.settings.optimizerOnShard
        ? {
            offsetInParam: this.handle.intersections[index]!.offsetInParam,
            length: this.handle.intersections[index]!.length,
          }
        : { offsetInParam: 0, length: entry.numel },
    );
  }

  /** Re-reads the flat values from the variables (after weights were loaded into the model). */
  reloadFromVariables(): void {
    const full = new Float32Array(this.handle.layout.paddedNumel);
    this.handle.layout.parameters.forEach((entry, index) => {
      full.set(this.variables[index]!.read().dataSync() as Float32Array, entry.offset);
    });
    const shardNumel = this.handle.layout.shardNumel;
    const start = this.group.rank * shardNumel;
    (this.handle.shardedBuffer().typedArray() as Float32Array).set(full.subarray(start, start + shardNumel));
    if (this.handle.unshardedAllocated)
      (this.handle.unshardedBuffer().typedArray() as Float32Array).set(full);
  }

  /** Bytes this bucket holds now: its flat buffers (allocated ones only). */
  allocatedBytes(): number {
    return this.handle.allocatedBytes;
  }

  private gatherShards(): void {
    const output = this.handle.unshardedBuffer().typedArray() as Float32Array;
    const input = this.handle.shardedBuffer().typedArray() as Float32Array;
    if (this.group.size === 1) output.set(input);
    else this.group.allGather(output, input).wait();
  }
}
