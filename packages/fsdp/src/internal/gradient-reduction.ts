import { allocateShared, type ProcessGroup, type Work } from '@fsdp-ts/collectives';
import type { FlatParamHandle } from '@fsdp-ts/flat-param';
import {
  bfloat16ToFloat32,
  float32ToBfloat16,
  narrowToBfloat16InPlace,
  readTensorValues,
  widenBfloat16InPlace,
} from '@fsdp-ts/tensor';
import type * as tf from '@tensorflow/tfjs-core';
import type { CommunicationDtype } from '../mixed-precision';
import type { ShardingSettings } from '../sharding-strategy';

/** How a unit's gradients are reduced (from the options). */
export interface ReductionSettings {
  readonly group: ProcessGroup;
  readonly sharding: ShardingSettings;
  /** 'bfloat16': reduce in bfloat16 (see [Note: mixed precision]). */
  readonly reduceDtype: CommunicationDtype;
}

/**
 * [Note: gradient flow]
 * 1. Autograd hands each trainable Parameter's full gradient to `write`, which adds it into the
 *    unit's unsharded flat gradient buffer (allocated unzeroed on first use in a step, its
 *    unwritten ranges zeroed before the reduction reads it, see [Note: zeroing unsharded
 *    gradients]; under no-shard the buffer stays and counts as zeroed from the step's first
 *    gradient on, see [Note: zeroing replicated gradients]). A range's first gradient of the
 *    step is copied.
 * 2. When a unit has all its gradients, `start` issues one reduce-scatter (average) per handle
 *    into the sharded gradient buffer (gradientReduction 'all-reduce': one all-reduce of the flat
 *    gradient) and returns at once: the transfer overlaps the rest of backward.
 *    With reduceDtype 'bfloat16' the input is rounded into a bfloat16 copy and the output widened
 *    after the wait; with a replicate group (hybrid) the output is then all-reduced over it.
 * 3. After backward, `finish` waits, adds into gradients the user kept from earlier steps
 *    (accumulation without zeroGrad), frees the unsharded gradient buffers and points every
 *    trainable Parameter's `grad` at its sharded gradient view.
 *
 * [Note: unit reduction state]
 * One UnitReduction per unit owns everything a unit's gradients go through in one step: the
 * gradients still expected, whether the reduction was issued, the Works in flight and the
 * buffers they write. Only its methods change it: beginStep → (expectGradients | write/gradientArrived)* → start →
 * finish (or keepUnreduced under noSync, or abort after a failure).
 */
export class UnitReduction {
  readonly #handles: readonly FlatParamHandle[];
  readonly #settings: ReductionSettings;
  /** Reduce-scatters (or all-reduces) issued in this backward. */
  #works: Work[] = [];
  /** Gradients expected (one per tap or recomputed Parameter per forward call) that have not arrived yet. */
  #pendingGradients = 0;
  /** This step's gradients were handed to a reduction (or the step ended without one). */
  #started = false;
  /** A gradient was written into the unsharded gradient buffers in this backward. */
  #received = false;
  /** noSync backwards left gradients here that no reduction has consumed yet. */
  #unreduced = false;
  /** Per handle: the shard-sized float32 output a reduction writes when kept gradients are added to. */
  readonly #scratch = new Map<FlatParamHandle, Float32Array>();
  /** Handles whose reduced output is added into gradients kept from earlier steps. */
  readonly #accumulating = new Set<FlatParamHandle>();
  /** bfloat16 reduce-scatters in flight: the bfloat16 output and the float32 array it widens into. */
  #widening: { output: Uint16Array; target: Float32Array }[] = [];
  /** bfloat16 all-reduces in flight: float32 gradients whose first half holds the words being reduced. */
  #widenInPlace: Float32Array[] = [];
  /** Handles whose unsharded gradient buffer counts as zero from this step on, and the indices written since. */
  readonly #written = new Map<FlatParamHandle, Set<number>>();
  /** Of those, the ones whose unwritten ranges still hold old values (see [Note: zeroing replicated gradients]). */
  readonly #zeroLater = new Set<FlatParamHandle>();
  /** The float32 output of each handle's last reduction (for the replica all-reduce). */
  readonly #reducedOutputs = new Map<FlatParamHandle, Float32Array>();

  constructor(handles: readonly FlatParamHandle[], settings: ReductionSettings) {
    this.#handles = handles;
    this.#settings = settings;
  }

  /** A backward starts: no gradient is expected until the step's forward makes taps. */
  beginStep(): void {
    this.#written.clear();
    this.#zeroLater.clear();
    this.#pendingGradients = 0;
    this.#started = false;
  }

  /**
   * A forward call made `count` taps (or a recomputed call will report `count` gradients): that
   * many more gradients arrive in backward (see [Note: units called more than once]).
   */
  expectGradients(count: number): void {
    this.#pendingGradients += count;
  }

  /** Adds one Parameter's full gradient into its handle's unsharded gradient buffer. */
  write(handle: FlatParamHandle, index: number, gradient: tf.Tensor): void {
    if (!this.#settings.sharding.shardParameters && !this.#received) this.#resetKeptGradients();
    if (!handle.hasUnshardedGrad) {
      // Allocated unzeroed: each range's first gradient is copied, the rest zeroed before the
      // reduction reads it (see [Note: zeroing unsharded gradients]).
      handle.unshardedGradBuffer({ zeroed: false });
      this.#written.set(handle, new Set());
      this.#zeroLater.add(handle);
    }
    this.#received = true;
    const target = handle.unshardedGradView(index)!.typedArray() as Float32Array;
    const values = readTensorValues(gradient);
    // A range of a buffer that counts as zero in this step and that nothing wrote yet: a copy
    // equals the sum (and runs at memcpy speed; the add loop cost ~40 ms per step here).
    const written = this.#written.get(handle);
    if (written !== undefined && !written.has(index)) {
      written.add(index);
      target.set(values.subarray(0, target.length) as Float32Array);
      return;
    }
    for (let element = 0; element < target.length; element++) target[element]! += values[element]!;
  }

  /** One tapped gradient arrived; true when it was the last one this unit expected. */
  gradientArrived(): boolean {
    this.#pendingGradients -= 1;
    return this.#pendingGradients === 0;
  }

  /**
   * Whether a reduction allocates a staging copy (the bfloat16 rounding of a reduce-scatter's
   * input) that lives until `finish`: then even a no-shard reduction holds memory that must be
   * bounded (see [Note: bounded gradient memory]). A bfloat16 all-reduce stages nothing: it runs
   * on the words rounded into the gradient's own bytes (see #reduce).
   */
  get stagesCopies(): boolean {
    return (
      this.#settings.reduceDtype !== 'float32' && this.#settings.sharding.gradientReduction !== 'all-reduce'
    );
  }

  /** Issues this step's reductions (once per step; nothing if no gradient arrived). */
  start(): void {
    if (this.#started) return;
    this.#started = true;
    if (!this.#received) return;
    for (const handle of this.#handles) {
      if (!handle.hasUnshardedGrad) continue;
      this.#zeroUnwritten(handle);
      const input = handle.unshardedGradBuffer().typedArray() as Float32Array;
      if (this.#settings.sharding.gradientReduction === 'all-reduce') {
        this.#works.push(this.#reduce(handle, input, input, 'allReduce'));
        continue;
      }
      const keep = handle.parameters.some(
        (parameter, index) => parameter.requiresGrad && handle.isGradientPresent(index),
      );
      if (keep) this.#accumulating.add(handle);
      else this.#accumulating.delete(handle);
      const output = keep
        ? this.#scratchFor(handle)
        : (handle.shardedGradBuffer().typedArray() as Float32Array);
      this.#works.push(this.#reduce(handle, input, output, 'reduceScatter'));
    }
  }

  /** Waits for the reductions, then points every trainable Parameter's `grad` at its reduced gradient. */
  finish(): void {
    this.#waitAll();
    this.#widenAll();
    const { sharding } = this.#settings;
    if (sharding.shardParameters && this.#received) {
      const replicateGroup = sharding.replicateGroup;
      if (replicateGroup !== null && replicateGroup.size > 1) {
        // The replicas' all-reduce moves the reduce dtype too: with 'bfloat16' each shard's
        // (already bfloat16-valued) gradient crosses the replicate group as 16-bit values.
        const replicaWorks: Work[] = [];
        const widening: { output: Uint16Array; target: Float32Array }[] = [];
        for (const handle of this.#handles) {
          const output = this.#reducedOutputs.get(handle);
          if (!handle.hasUnshardedGrad || output === undefined) continue;
          if (this.#settings.reduceDtype === 'float32') {
            replicaWorks.push(replicateGroup.allReduce(output, { op: 'avg' }));
            continue;
          }
          const output16 = float32ToBfloat16(output, allocateShared(Uint16Array, output.length));
          widening.push({ output: output16, target: output });
          replicaWorks.push(replicateGroup.allReduce(output16, { op: 'avg', dtype: 'bfloat16' }));
        }
        for (const work of replicaWorks) work.wait();
        for (const { output, target } of widening) bfloat16ToFloat32(output, target);
      }
      for (const handle of this.#handles) {
        if (!handle.hasUnshardedGrad) continue;
        if (this.#accumulating.has(handle)) this.#addScratchIntoShard(handle);
        handle.freeUnshardedGrad();
        handle.setGradientsPresent(true);
      }
    }
    this.#started = false;
    this.#received = false;
    this.#unreduced = false;
  }

  /**
   * Whether noSync backwards accumulated gradients that no synchronised backward has reduced yet:
   * `grad` then is not the gradient a step would use (clipGradNorm and summonFullParams withGrads
   * refuse to run).
   */
  get holdsUnreducedGradients(): boolean {
    return this.#unreduced;
  }

  /** noSync: the step ends with its gradients unreduced; the unsharded buffers keep accumulating. */
  keepUnreduced(): void {
    for (const handle of this.#zeroLater) this.#zeroUnwritten(handle);
    if (this.#received) this.#unreduced = true;
    this.#started = false;
    this.#received = false;
  }

  /**
   * After a failed step: waits for what was issued (every rank issued it) and drops unreduced
   * gradients. A reduction that failed too (the group broke) has nothing more to report: the step
   * failed already.
   */
  abort(): void {
    const works = this.#works;
    this.#works = [];
    for (const work of works) {
      try {
        work.wait();
      } catch {
        // See above: the step's failure is what the caller throws.
      }
    }
    // A bfloat16 all-reduce left words in its gradient's bytes: widened, they are float32 again
    // (this rank's rounded gradient, or the average if the reduction completed).
    this.#widenAll();
    // Sharded units free their unsharded gradients below: nothing will read them.
    if (!this.#settings.sharding.shardParameters)
      for (const handle of this.#zeroLater) this.#zeroUnwritten(handle);
    this.#zeroLater.clear();
    this.#started = false;
    this.#received = false;
    this.#unreduced = false;
    if (!this.#settings.sharding.shardParameters) return;
    for (const handle of this.#handles) if (handle.hasUnshardedGrad) handle.freeUnshardedGrad();
  }

  /**
   * [Note: zeroing replicated gradients]
   * Under no-shard the flat gradient buffer outlives the step (it is the `grad`s). When the user
   * dropped the grads (`zeroGrad()` sets them to null) the step starts from zero, but instead of
   * filling the whole buffer first (12.6 MB a step for the reference GPT: a memset, then every
   * byte written again by the copies of `write`), only the ranges no gradient was copied into
   * this step are zeroed (unused and frozen parameters, padding), before anything reads them:
   * when the all-reduce is issued, or at the end of a noSync or failed backward.
   *
   * [Note: zeroing unsharded gradients]
   * The same holds for the unsharded gradient buffer of a sharded unit, allocated for each
   * backward: it comes from the storage pool unzeroed, each range's first gradient is copied in,
   * and only the ranges nothing was copied into (padding, frozen or unused parameters) are zeroed
   * before the reduce-scatter reads it. Zero-filling it on allocation cost about 2 ms of the
   * ~30 ms main-thread CPU of a communication-bound step of the reference GPT (13 MB a step).
   */
  #zeroUnwritten(handle: FlatParamHandle): void {
    if (!this.#zeroLater.delete(handle)) return;
    const written = this.#written.get(handle)!;
    const flat = handle.unshardedGradBuffer().typedArray() as Float32Array;
    let cursor = 0;
    handle.layout.parameters.forEach(({ offset, numel }, index) => {
      if (!written.has(index)) return;
      if (offset > cursor) flat.fill(0, cursor, offset);
      cursor = Math.max(cursor, offset + numel);
    });
    if (flat.length > cursor) flat.fill(0, cursor);
  }

  /** After the waits: every bfloat16 output widened into its float32 target. */
  #widenAll(): void {
    for (const { output, target } of this.#widening.splice(0)) bfloat16ToFloat32(output, target);
    for (const values of this.#widenInPlace.splice(0)) widenBfloat16InPlace(values);
  }

  #waitAll(): void {
    const works = this.#works;
    this.#works = [];
    for (const work of works) work.wait();
  }

  /** Issues one reduction (average) of `input` into `output`, in the settings' reduce dtype. */
  #reduce(
    handle: FlatParamHandle,
    input: Float32Array,
    output: Float32Array,
    kind: 'allReduce' | 'reduceScatter',
  ): Work {
    this.#reducedOutputs.set(handle, output);
    const { group } = this.#settings;
    if (this.#settings.reduceDtype === 'float32') {
      return kind === 'allReduce'
        ? group.allReduce(input, { op: 'avg' })
        : group.reduceScatter(output, input, { op: 'avg' });
    }
    const options = { op: 'avg', dtype: 'bfloat16' } as const;
    if (kind === 'allReduce') {
      // In place (input is output): the words take the first half of the gradient's own bytes,
      // so no copy outlives the call and nothing bounds how many are in flight
      // ([Note: bfloat16 in the float32's own bytes] in @fsdp-ts/kernels).
      const words = narrowToBfloat16InPlace(output);
      this.#widenInPlace.push(output);
      return group.allReduce(words, options);
    }
    const input16 = float32ToBfloat16(input, allocateShared(Uint16Array, input.length));
    const output16 = allocateShared(Uint16Array, output.length);
    this.#widening.push({ output: output16, target: output });
    return group.reduceScatter(output16, input16, options);
  }

  /** Replicated parameters keep their flat gradient across steps; start from zero if the user dropped the grads. */
  #resetKeptGradients(): void {
    for (const handle of this.#handles) {
      const wasAllocated = handle.hasUnshardedGrad;
      handle.unshardedGradBuffer();
      const kept =
        wasAllocated &&
        handle.parameters.every(
          (parameter, index) => !parameter.requiresGrad || parameter.grad === handle.unshardedGradView(index),
        );
      if (!kept) {
        // Counts as zero from now on: each parameter's first gradient this step is copied, not
        // added (see write), and what none is copied into is zeroed before it is read.
        this.#written.set(handle, new Set());
        this.#zeroLater.add(handle);
        handle.parameters.forEach((parameter, index) => {
          if (parameter.requiresGrad) parameter.grad = handle.unshardedGradView(index);
        });
      }
    }
  }

  #scratchFor(handle: FlatParamHandle): Float32Array {
    let scratch = this.#scratch.get(handle);
    if (scratch === undefined) {
      scratch = allocateShared(Float32Array, handle.layout.shardNumel);
      this.#scratch.set(handle, scratch);
    }
    return scratch;
  }

  /** Kept gradients: grad += reduced; dropped ones: grad = reduced (per parameter range). */
  #addScratchIntoShard(handle: FlatParamHandle): void {
    const scratch = this.#scratchFor(handle);
    const shard = handle.shardedGradBuffer().typedArray() as Float32Array;
    handle.intersections.forEach((intersection, index) => {
      if (!handle.parameters[index]!.requiresGrad || intersection.length === 0) return;
      const start = intersection.offsetInShard;
      const end = start + intersection.length;
      if (handle.isGradientPresent(index))
        for (let element = start; element < end; element++) shard[element]! += scratch[element]!;
      else shard.set(scratch.subarray(start, end), start);
    });
  }
}
