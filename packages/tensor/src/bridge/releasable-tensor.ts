import * as tf from '@tensorflow/tfjs-core';
import { TensorError } from '../errors';
import { shapesEqual } from '../shape';
import type { TensorView } from '../tensor-view';
import { tfjsValues, toTf } from './to-tf';

/** The KernelBackend methods used here (public on every tfjs backend; cpu and wasm checked). */
interface DataBackend {
  refCount(dataId: tf.DataId): number;
  disposeData(dataId: tf.DataId, force?: boolean): boolean;
  move(
    dataId: tf.DataId,
    values: tf.backend_util.BackendValues | null,
    shape: number[],
    dtype: tf.DataType,
    refCount: number,
  ): void;
}

interface EngineTensorInfo {
  state: { tensorInfo: WeakMap<tf.DataId, { backend: DataBackend }> };
}

/**
 * 'resident': the tensor's data is in the backend. 'released': the backend holds an empty
 * allocation under the same dataId. 'gone': every tensor sharing the dataId was disposed.
 */
export type ReleasableTensorState = 'resident' | 'released' | 'gone';

/**
 * A tf.Tensor whose memory can be given back while the tensor, and every tensor sharing its
 * dataId, stays a valid object: PyTorch's `storage.resize_(0)` for tfjs.
 *
 * [Note: releasable tensor data]
 * tfjs identifies a tensor's memory by its dataId. The tape keeps what a gradient needs as
 * tensors sharing that dataId (engine clones, see [Note: shared identity]). `release()` frees the
 * backend's memory and leaves an empty allocation under the same dataId with the same reference
 * count, so disposing any holder while released stays correct and tfjs's own bookkeeping
 * (tf.memory()) does not change. `restore(view)` puts the view's values back under that dataId
 * (the engine's own `backend.move`, which tfjs uses to move data between backends): on cpu the
 * tensor aliases the view's memory again (no copy), on wasm they are copied into a fresh heap
 * allocation. Every saved clone sees the restored values.
 *
 * Invariant: no kernel may read the tensor (or a tensor sharing its dataId) while it is
 * released. Nothing checks this on the hot path: a released tensor reads as empty memory.
 */
export class ReleasableTensor {
  readonly tensor: tf.Tensor;
  private currentState: ReleasableTensorState = 'resident';

  /**
   * Whether the current backend computes on a copy of its own that a resident tensor's values
   * were copied into (wasm: its heap), so the view a tensor was made or restored from may be
   * freed while the tensor is resident. false on cpu, where the tensor aliases the view's memory
   * (see [Note: zero-copy bridge]), and on any backend not checked here.
   */
  static backendHoldsCopies(): boolean {
    return tf.getBackend() === 'wasm';
  }

  /** A tensor over the view's values (see toTf: zero copy on cpu). The caller owns `tensor`. */
  constructor(view: TensorView) {
    this.tensor = toTf(view);
  }

  /** Whether the tensor's data is resident, released, or gone (see ReleasableTensorState). */
  get state(): ReleasableTensorState {
    if (this.currentState !== 'gone' && this.backend().refCount(this.tensor.dataId) === 0)
      this.currentState = 'gone';
    return this.currentState;
  }

  /** Frees the backend memory behind the dataId (resident → released). Idempotent. */
  release(): void {
    if (this.state !== 'resident') return;
    const backend = this.backend();
    const { dataId, dtype } = this.tensor;
    const references = backend.refCount(dataId);
    backend.disposeData(dataId, true);
    backend.move(dataId, emptyValues(dtype), [0], dtype, references);
    this.currentState = 'released';
  }

  /**
   * Puts `view`'s values back under the same dataId (released → resident). The view must have the
   * tensor's shape. Does nothing once every holder of the dataId is gone.
   */
  restore(view: TensorView): void {
    const state = this.state;
    if (state === 'gone') return;
    if (state === 'resident') {
      throw new TensorError('ReleasableTensor.restore: the tensor is resident.', {
        code: 'invalid-argument',
        expected: "state 'released'",
        actual: state,
        fix: 'call release() before restore(), once per cycle.',
      });
    }
    if (!shapesEqual(view.shape, this.tensor.shape)) {
      throw new TensorError(
        `ReleasableTensor.restore: a view of shape [${view.shape.join(', ')}] for a tensor of shape [${this.tensor.shape.join(', ')}].`,
        {
          code: 'shape-mismatch',
          expected: this.tensor.shape,
          actual: view.shape,
          fix: 'restore from a view of the same shape as the tensor.',
        },
      );
    }
    const { values, dtype } = tfjsValues(view);
    const backend = this.backend();
    const { dataId } = this.tensor;
    const references = backend.refCount(dataId);
    backend.disposeData(dataId, true);
    backend.move(dataId, values, [...this.tensor.shape], dtype, references);
    this.currentState = 'resident';
  }

  private backend(): DataBackend {
    const engine = tf.engine() as unknown as EngineTensorInfo;
    return (
      engine.state.tensorInfo.get(this.tensor.dataId)?.backend ?? (tf.backend() as unknown as DataBackend)
    );
  }
}

function emptyValues(dtype: tf.DataType): tf.backend_util.BackendValues {
  return dtype === 'int32' ? new Int32Array(0) : new Float32Array(0);
}
