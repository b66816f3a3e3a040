import { decodeBfloat16 } from '@fsdp-ts/kernels';
import type { OpMessage } from '../op-message.js';
import type { WorkArray } from './ring.js';

/**
 * The tcp engine's reusable float32 and int32 arrays that reductions run on when they cannot run
 * on the caller's buffer (bfloat16 buffers, reduce-scatter's output); they grow to the largest op
 * and are reused, so an op allocates nothing once the group has run one as large.
 */
export class WorkArrays {
  private floats = new Float32Array(0);
  private ints = new Int32Array(0);

  /** The array the reduction runs on: the buffer itself, or float32 scratch for bfloat16. */
  workFor(buffer: WorkArray, dtype: OpMessage['dtype'], length: number, copyFrom: WorkArray): WorkArray {
    if (dtype === 'bfloat16') {
      const work = this.floatScratch(length);
      decodeBfloat16(copyFrom as Uint16Array, work);
      return work;
    }
    if (buffer === copyFrom) return buffer;
    const work = dtype === 'int32' ? this.intScratch(length) : this.floatScratch(length);
    work.set(copyFrom as never);
    return work;
  }

  /** Uninitialised float32 or int32 scratch as long as `like`. */
  scratchFor(like: Float32Array | Int32Array): Float32Array | Int32Array {
    return like instanceof Int32Array ? this.intScratch(like.length) : this.floatScratch(like.length);
  }

  /** Uninitialised float32 scratch of `length` elements. */
  floatScratch(length: number): Float32Array {
    if (this.floats.length < length) this.floats = new Float32Array(length);
    return this.floats.subarray(0, length);
  }

  private intScratch(length: number): Int32Array {
    if (this.ints.length < length) this.ints = new Int32Array(length);
    return this.ints.subarray(0, length);
  }
}
