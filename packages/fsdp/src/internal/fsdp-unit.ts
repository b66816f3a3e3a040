import { allocateShared, type ProcessGroup, type Work } from '@fsdp-ts/collectives';
import type { FlatParamHandle } from '@fsdp-ts/flat-param';
import type { Module } from '@fsdp-ts/nn';
import { bfloat16ToFloat32, float32ToBfloat16, type Parameter } from '@fsdp-ts/tensor';
import { FsdpError } from '../errors';
import type { CommunicationDtype } from '../mixed-precision';
import type { ShardPager } from '../offload/offloaded-parameters';
import { type ReductionSettings, UnitReduction } from './gradient-reduction';

/**
 * [Note: unit states]
 * 'sharded'    every Parameter of the unit is a 1-D view of this rank's shard; the unsharded
 *              buffers are freed.
 * 'gathering'  all-gathers into the unsharded buffers are in flight (issued early: prefetch);
 *              Parameters still point at their shards.
 * 'unsharded'  the all-gathers completed; every Parameter is a full-shape view into the
 *              unsharded buffer.
 * Transitions: startUnshard (sharded → gathering), finishUnshard (gathering → unsharded),
 * reshard (unsharded → sharded). `no-shard` units are unsharded at construction and stay so.
 */
export type UnitState = 'sharded' | 'gathering' | 'unsharded';

/** What callers outside the runtime see of a unit (read-only; `FullyShardedDataParallel.units`). */
export interface FsdpUnitView {
  /** Dotted path of the unit's module ('' for the root). */
  readonly name: string;
  readonly module: Module;
  readonly isRoot: boolean;
  readonly handles: readonly FlatParamHandle[];
  readonly state: UnitState;
  /** 'the root unit' or "unit 'name'", for messages. */
  readonly label: string;
}

/** Where a Parameter lives: its unit, the handle holding it, and its index in that handle. */
export interface ParameterLocation {
  readonly unit: FsdpUnitView;
  readonly handle: FlatParamHandle;
  readonly index: number;
}

/** ParameterLocation inside the runtime, with the unit itself. */
export interface UnitLocation extends ParameterLocation {
  readonly unit: FsdpUnit;
}

/** What a unit needs from the options. */
export interface UnitSettings extends ReductionSettings {
  /** dtype of this unit's parameter all-gathers in forward and backward. */
  readonly gatherDtype: CommunicationDtype;
}

export class FsdpUnit implements FsdpUnitView {
  readonly name: string;
  readonly module: Module;
  readonly isRoot: boolean;
  readonly handles: readonly FlatParamHandle[];
  /** This step's gradient state and reductions (see [Note: unit reduction state]). */
  readonly reduction: UnitReduction;
  #state: UnitState = 'sharded';
  #gatherWorks: Work[] = [];
  /** bfloat16 all-gather outputs to widen into the unsharded buffers (see [Note: mixed precision]). */
  #widening: [FlatParamHandle, Uint16Array][] = [];
  readonly #gatherDtype: CommunicationDtype;
  /** With offload.parameters 'disk': pages the shards in before the all-gather, out after ([Note: offloaded parameters]). */
  shardPager: ShardPager | null = null;

  constructor(
    name: string,
    module: Module,
    isRoot: boolean,
    handles: FlatParamHandle[],
    settings: UnitSettings,
  ) {
    this.name = name;
    this.module = module;
    this.isRoot = isRoot;
    this.handles = handles;
    this.#gatherDtype = settings.gatherDtype;
    this.reduction = new UnitReduction(handles, settings);
    if (!settings.sharding.shardParameters) this.#unshardLocally();
  }

  get state(): UnitState {
    return this.#state;
  }

  get label(): string {
    return this.isRoot ? 'the root unit' : `unit '${this.name}'`;
  }

  trainableParameters(): Parameter[] {
    return this.handles.flatMap((handle) => handle.parameters.filter((parameter) => parameter.requiresGrad));
  }

  /**
   * Issues the all-gathers (sharded → gathering), in `dtype` (default `gatherDtype`). Does nothing
   * if already gathering or unsharded.
   */
  startUnshard(group: ProcessGroup, dtype: CommunicationDtype = this.#gatherDtype): void {
    if (this.#state !== 'sharded') return;
    this.shardPager?.pageIn(this);
    for (const handle of this.handles) {
      // Every element is written by the all-gather (or the widening of its bfloat16 output).
      const output = handle.unshardedBuffer({ zeroed: false }).typedArray() as Float32Array;
      const input = handle.shardedBuffer().typedArray() as Float32Array;
      if (dtype === 'float32') {
        this.#gatherWorks.push(group.allGather(output, input));
        continue;
      }
      const input16 = float32ToBfloat16(input, allocateShared(Uint16Array, input.length));
      const output16 = allocateShared(Uint16Array, output.length);
      this.#gatherWorks.push(group.allGather(output16, input16, { dtype: 'bfloat16' }));
      this.#widening.push([handle, output16]);
    }
    this.#state = 'gathering';
  }

  /** Waits for the all-gathers and points every Parameter at its full view (→ unsharded). */
  finishUnshard(group: ProcessGroup, dtype: CommunicationDtype = this.#gatherDtype): void {
    if (this.#state === 'unsharded') return;
    if (this.#state === 'sharded') this.startUnshard(group, dtype);
    const works = this.#gatherWorks;
    this.#gatherWorks = [];
    for (const work of works) work.wait();
    this.shardPager?.drop(this);
    for (const [handle, output16] of this.#widening.splice(0)) {
      bfloat16ToFloat32(output16, handle.unshardedBuffer().typedArray() as Float32Array);
    }
    for (const handle of this.handles) handle.useUnshardedViews();
    this.#state = 'unsharded';
  }

  /**
   * Frees the gathered flat parameters while the unit stays 'unsharded', for a backward that
   * computes on the backend's own copies ([Note: gathered values the backend holds]); the next
   * reshard and all-gather work as usual.
   */
  freeGatheredValues(): void {
    if (this.#state !== 'unsharded') return;
    for (const handle of this.handles) handle.freeUnshardedValues();
  }

  /** Points every Parameter back at its shard and frees the unsharded buffers (unsharded → sharded). */
  reshard(): void {
    if (this.#state === 'gathering') {
      // An exception between prefetch and use: finish the collective (every rank issued it) first.
      // A failed all-gather no longer writes the buffer either: the unit still ends sharded, and
      // the first failure is rethrown.
      let failure: unknown;
      for (const work of this.#gatherWorks) {
        try {
          work.wait();
        } catch (error) {
          failure ??= error;
        }
      }
      this.#gatherWorks = [];
      this.#widening = [];
      this.shardPager?.drop(this);
      for (const handle of this.handles) handle.freeUnsharded();
      this.#state = 'sharded';
      if (failure !== undefined) throw failure;
      return;
    }
    if (this.#state !== 'unsharded') {
      throw new FsdpError(`reshard of ${this.label}: expected state 'unsharded', found '${this.#state}'.`, {
        code: 'wrong-state',
        expected: 'unsharded',
        actual: this.#state,
      });
    }
    for (const handle of this.handles) {
      handle.useShardedViews();
      handle.freeUnsharded();
    }
    this.#state = 'sharded';
  }

  /** no-shard: the unsharded buffers are this rank's full copies; the shard storages are not needed. */
  #unshardLocally(): void {
    // Gradients live in the unsharded gradient buffer (all-reduced in place).
    for (const handle of this.handles) handle.replicate();
    this.#state = 'unsharded';
  }
}
