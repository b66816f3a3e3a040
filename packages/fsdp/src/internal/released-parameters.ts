import type { Parameter } from '@fsdp-ts/tensor';
import { ReleasableTensor } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import type { FsdpUnit } from './fsdp-unit';

/**
 * The tensors standing for one gathered unit's Parameters during a training step, whose memory is
 * given back after the unit's forward and brought back before its backward.
 *
 * [Note: released parameters]
 * Under full-shard without recomputation a unit's forward runs on the outer tape, so tfjs keeps
 * the activations and, for every kernel that needs a parameter in its gradient, a tensor sharing
 * the parameter tensor's dataId. After the forward, `release()` frees that memory (the unit then
 * reshards its flat buffer); before the unit's backward (a pre-backward hook), the unit gathers
 * again and `restore()` puts the gathered values back under the same dataIds, so every saved
 * tensor sees them. After the unit's last parameter gradient, it is released again. On cpu a
 * restored tensor aliases the unsharded flat buffer (no copy); on wasm the values are copied into
 * the heap once, as creating the tensor did. PyTorch does the same with `storage.resize_(0)`.
 * A unit whose forward runs more than once in a step (a shared block) gets one ReleasedParameters
 * per call, each with its own tensors and pre-backward hook, since each call's saved tensors
 * share the dataIds of that call's tensors: see [Note: units called more than once].
 */
export class ReleasedParameters {
  /** What layers see for each Parameter in this call: made on first lookup (see [Note: taps at first use]). */
  readonly tensors: ReadonlyMap<Parameter, tf.Tensor>;
  private readonly releasable: { tensor: ReleasableTensor; handleIndex: number; index: number }[] = [];
  private readonly unit: FsdpUnit;
  private readonly wrapped: tf.Tensor[] = [];

  /**
   * Tensors over the unit's unsharded views (the unit must be gathered). `wrap` turns a raw tensor
   * into what layers see (a gradient tap for trainable Parameters); it must share the raw
   * tensor's dataId.
   */
  constructor(unit: FsdpUnit, wrap: (parameter: Parameter, raw: tf.Tensor) => tf.Tensor) {
    this.unit = unit;
    const raw = new Map<Parameter, tf.Tensor>();
    unit.handles.forEach((handle, handleIndex) => {
      handle.parameters.forEach((parameter, index) => {
        const tensor = new ReleasableTensor(handle.unshardedView(index));
        this.releasable.push({ tensor, handleIndex, index });
        raw.set(parameter, tensor.tensor);
      });
    });
    this.tensors = new WrappedOnFirstUse(raw, (parameter, tensor) => {
      const wrapped = tf.keep(wrap(parameter, tensor));
      this.wrapped.push(wrapped);
      return wrapped;
    });
  }

  /**
   * The forward call is over: disposes the tensors made for its lookups (the tape holds what the
   * gradients need; each shares its raw tensor's dataId, so the memory stays with `release()`).
   */
  endCall(): void {
    for (const tensor of this.wrapped.splice(0)) tensor.dispose();
  }

  /** Frees the memory of every parameter tensor (idempotent). */
  release(): void {
    for (const { tensor } of this.releasable) tensor.release();
  }

  /** Puts the unit's gathered values back (the unit must be unsharded again). */
  restore(): void {
    for (const { tensor, handleIndex, index } of this.releasable) {
      if (tensor.state === 'released') tensor.restore(this.unit.handles[handleIndex]!.unshardedView(index));
    }
  }
}

/**
 * [Note: taps at first use]
 * A Parameter's gradient tap is made when the unit's forward first looks the Parameter up, not
 * when the unit starts, so on the tape each tap sits just before the kernel that uses it. tfjs
 * walks the tape backwards and keeps every gradient until the node that consumes it runs: with
 * every tap made at the unit's start, all the unit's weight gradients (as large as its gathered
 * parameters) waited for the taps at the end of the unit's backward, on top of the restored
 * parameters; made at first use, each weight gradient reaches its tap (which copies it into the
 * unsharded gradient buffer and disposes it, see [Note: gradient taps]) as soon as its kernel's
 * backward has made it. A Parameter the forward never looks up gets no tap and no gradient (its
 * range of the unsharded gradient is zeroed, as before). Lookups may happen inside a layer's own
 * tf.tidy, so made tensors are kept and disposed when the call ends (`endCall`).
 */
class WrappedOnFirstUse extends Map<Parameter, tf.Tensor> {
  readonly #raw: ReadonlyMap<Parameter, tf.Tensor>;
  readonly #wrap: (parameter: Parameter, raw: tf.Tensor) => tf.Tensor;

  constructor(
    raw: ReadonlyMap<Parameter, tf.Tensor>,
    wrap: (parameter: Parameter, raw: tf.Tensor) => tf.Tensor,
  ) {
    super();
    this.#raw = raw;
    this.#wrap = wrap;
  }

  override has(parameter: Parameter): boolean {
    return this.#raw.has(parameter);
  }

  override get(parameter: Parameter): tf.Tensor | undefined {
    const made = super.get(parameter);
    if (made !== undefined) return made;
    const raw = this.#raw.get(parameter);
    if (raw === undefined) return undefined;
    const wrapped = this.#wrap(parameter, raw);
    super.set(parameter, wrapped);
    return wrapped;
  }
}

/**
 * Every unit's ReleasedParameters in one step, one per forward call, in call order.
 *
 * [Note: units called more than once]
 * A unit's forward may run several times in one step (a block applied twice, a tied module).
 * Each call records its own ReleasedParameters (keeping only the last one lost the earlier
 * calls' tensors: their backward read released memory), and each call's taps expect one gradient
 * per trainable Parameter (UnitReduction counts them as the taps are made). So the unit's last
 * gradient is the last of its last backward: only then are all its calls' tensors released, the
 * unit resharded and its reduction issued. Between the backward of a later call and that of an
 * earlier one the unit stays gathered (its gradients accumulate in its unsharded buffer).
 */
export class ReleasedParametersByUnit {
  readonly #calls = new Map<FsdpUnit, ReleasedParameters[]>();

  /** A forward call of `unit` recorded its parameter tensors. */
  add(unit: FsdpUnit, parameters: ReleasedParameters): void {
    const calls = this.#calls.get(unit);
    if (calls === undefined) this.#calls.set(unit, [parameters]);
    else calls.push(parameters);
  }

  /** How many forward calls of `unit` recorded tensors in this step. */
  callCount(unit: FsdpUnit): number {
    return this.#calls.get(unit)?.length ?? 0;
  }

  /** Frees the memory of every call's parameter tensors of `unit` (idempotent). */
  release(unit: FsdpUnit): void {
    for (const parameters of this.#calls.get(unit) ?? []) parameters.release();
  }

  /** Frees the memory of every unit's parameter tensors (idempotent). */
  releaseAll(): void {
    for (const calls of this.#calls.values()) for (const parameters of calls) parameters.release();
  }
}
