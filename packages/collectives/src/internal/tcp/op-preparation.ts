import {
  decodeBfloat16,
  encodeBfloat16,
  encodeRoundBfloat16,
  finishAverage,
  reduceInto,
  roundToBfloat16InPlace,
} from '@fsdp-ts/kernels';
import type { OpMessage } from '../op-message.js';
import type { PeerLink } from './peer-link.js';
import {
  allGatherPlan,
  allReducePlan,
  broadcastPlan,
  encodeRange,
  initialBytes,
  type ReducePlanOptions,
  type RingPlan,
  type RingScratch,
  reduceScatterPlan,
  type Wire,
  type WorkArray,
} from './ring.js';
import { runRingSteps } from './ring-steps.js';

/** All-reduces of at most this many bytes use the one-step direct exchange instead of the ring. */
export const DIRECT_ALL_REDUCE_BYTES = 64 * 1024;

/** An op prepared before its header check ([Note: eager first segment]). */
export interface PreparedOp {
  eager: { toNext: Uint8Array | null; toAll: Uint8Array | null };
  /** The rest on node:net, after every header matched. */
  rest: (previous: PeerLink | null, next: PeerLink | null) => Promise<void>;
  ring?: { plan: RingPlan; after?: () => void };
}

/** An op as its eager bytes and the rest: a ring plan (native or node:net) or a direct exchange. */
export class OpPreparation {
  constructor(
    private readonly rank: number,
    private readonly size: number,
    private readonly scratch: RingScratch,
    private readonly work: WorkArrays,
    private readonly links: readonly (PeerLink | null)[],
  ) {}

  prepare(op: OpMessage): PreparedOp {
    const { rank, size } = this;
    const ring = (plan: RingPlan, after?: () => void): PreparedOp => ({
      eager: { toNext: initialBytes(plan, this.scratch), toAll: null },
      ring: { plan, ...(after === undefined ? {} : { after }) },
      rest: async (previous, next) => {
        await runRingSteps(plan, previous, next, this.scratch);
        await next?.flushed();
        after?.();
      },
    });
    switch (op.kind) {
      case 'allReduce': {
        const buffer = op.output!;
        const options = this.reduceOptions(op);
        if (op.dtype === 'bfloat16' && size > 1 && op.count * 4 > DIRECT_ALL_REDUCE_BYTES) {
          const plan = allReducePlan(this.work.floatScratch(op.count), options);
          return ring(this.bfloat16InPlace(plan, buffer as Uint16Array, 0));
        }
        const work = this.work.workFor(buffer, op.dtype, op.count, buffer);
        const encodeBack = () => {
          if (op.dtype === 'bfloat16') encodeBfloat16(work as Float32Array, buffer as Uint16Array);
        };
        if (size > 1 && op.count * work.BYTES_PER_ELEMENT <= DIRECT_ALL_REDUCE_BYTES) {
          const direct = work as Float32Array | Int32Array;
          const payload = directAllReducePayload(direct, options, this.scratch);
          return {
            eager: { toNext: null, toAll: payload },
            rest: async () => {
              await finishDirectAllReduce(direct, payload, options, this.links);
              encodeBack();
            },
          };
        }
        return ring(allReducePlan(work, options), encodeBack);
      }
      case 'reduceScatter': {
        const input = op.input!;
        const options = this.reduceOptions(op);
        let plan: RingPlan;
        if (op.dtype === 'bfloat16' && size > 1) {
          const work = this.work.floatScratch(input.length);
          plan = reduceScatterPlan(work, op.count, options);
          return ring(
            this.bfloat16InPlace(plan, op.output as Uint16Array, rank * op.count, input as Uint16Array),
          );
        }
        if (op.dtype === 'bfloat16') {
          plan = reduceScatterPlan(
            this.work.workFor(op.output!, op.dtype, input.length, input),
            op.count,
            options,
          );
        } else if (size > 1 && op.wireDtype !== 'bfloat16' && isOwnBlock(op.output!, input, rank)) {
          // [Note: in-place all-gather and reduce-scatter]: in place, the partial sums go into
          // the input itself and the last reduce step leaves this rank's block final where the
          // output is; no work array, nothing copied after.
          return ring(reduceScatterPlan(input as Float32Array | Int32Array, op.count, options));
        } else {
          // No copy of the input: each reduce step writes input (op) incoming into scratch.
          plan = reduceScatterPlan(
            this.work.scratchFor(input as Float32Array | Int32Array),
            op.count,
            options,
          );
          plan.base = input;
          if (op.wireDtype === 'bfloat16' && size > 1) {
            // [Note: results in place]: the last reduce step writes straight into the output.
            plan.final = { array: op.output as Float32Array, offset: rank * op.count };
            return ring(plan);
          }
        }
        return ring(plan, () => {
          // The ring's last reduce step fills this rank's block; a group of one has no steps.
          const result = size === 1 ? (plan.base ?? plan.work) : plan.work;
          const own = result.subarray(rank * op.count, (rank + 1) * op.count);
          if (op.dtype === 'bfloat16') encodeBfloat16(own as Float32Array, op.output as Uint16Array);
          else op.output!.set(own as never);
        });
      }
      case 'allGather': {
        const output = op.output!;
        if (op.wireDtype === 'bfloat16') {
          // One pass writes the bytes sent first and this rank's own block, rounded as peers receive it.
          const encoded = this.scratch.takeStaging(op.count);
          const own = (output as Float32Array).subarray(rank * op.count, (rank + 1) * op.count);
          encodeRoundBfloat16(op.input as Float32Array, own, encoded);
          const plan = allGatherPlan(output, op.count, rank, size, 'bfloat16');
          plan.initialEncoded = new Uint8Array(encoded.buffer, encoded.byteOffset, encoded.byteLength);
          return ring(plan);
        }
        output.set(op.input! as never, rank * op.count);
        return ring(allGatherPlan(output, op.count, rank, size, 'same'));
      }
      case 'broadcast': {
        const wire: Wire = op.wireDtype === 'bfloat16' ? 'bfloat16' : 'same';
        if (wire === 'bfloat16' && rank === op.root) roundToBfloat16InPlace(op.output as Float32Array);
        return ring(broadcastPlan(op.output!, rank, size, op.root, wire));
      }
      default:
        return { eager: { toNext: null, toAll: null }, rest: async () => undefined };
    }
  }

  /**
   * A ring plan over a bfloat16 buffer whose results land in `bits` from work element `offset`
   * ([Note: results in place]); the initial range is sent from the input's bytes, never decoded.
   */
  private bfloat16InPlace(plan: RingPlan, bits: Uint16Array, offset: number, input = bits): RingPlan {
    const work = plan.work as Float32Array;
    const { start, end } = plan.initial!;
    decodeBfloat16(input.subarray(0, start), work.subarray(0, start));
    decodeBfloat16(input.subarray(end), work.subarray(end));
    plan.initialEncoded = new Uint8Array(input.buffer, input.byteOffset + start * 2, (end - start) * 2);
    plan.final = { array: bits, offset };
    return plan;
  }

  private reduceOptions(op: OpMessage): ReducePlanOptions {
    const bfloat16Wire = op.wireDtype === 'bfloat16';
    return {
      rank: this.rank,
      size: this.size,
      reduceOp: op.reduceOp,
      reduceWire: bfloat16Wire ? 'bfloat16' : 'same',
      ownWire: bfloat16Wire || op.dtype === 'bfloat16' ? 'bfloat16' : 'same',
      gatherWire: bfloat16Wire || op.dtype === 'bfloat16' ? 'bfloat16' : 'same',
      roundFinal: bfloat16Wire || op.dtype === 'bfloat16',
    };
  }
}

/**
 * [Note: direct all-reduce] Small buffers: every rank sends its whole buffer to every peer right
 * behind the header (one step instead of 2(size-1)); each reduces all in rank order, same bits.
 */
export function directAllReducePayload(
  work: Float32Array | Int32Array,
  options: ReducePlanOptions,
  scratch: RingScratch,
): Uint8Array {
  if (options.reduceWire === 'bfloat16') roundToBfloat16InPlace(work as Float32Array);
  return encodeRange(work, 0, work.length, options.reduceWire, scratch);
}

export async function finishDirectAllReduce(
  work: Float32Array | Int32Array,
  payload: Uint8Array,
  options: ReducePlanOptions,
  links: readonly (PeerLink | null)[],
): Promise<void> {
  const { rank, size, reduceOp } = options;
  const count = work.length;
  const bfloat16Wire = options.reduceWire === 'bfloat16';
  const received = await Promise.all(
    links.map(async (link) => {
      if (link === null) return null;
      const bytes = new Uint8Array(payload.length);
      await link.readInto(bytes);
      return bytes;
    }),
  );
  const contribution = (peer: number): Float32Array | Int32Array => {
    if (peer === rank) return work;
    const bytes = received[peer]!;
    if (work instanceof Int32Array) return new Int32Array(bytes.buffer, 0, count);
    if (!bfloat16Wire) return new Float32Array(bytes.buffer, 0, count);
    const floats = new Float32Array(count);
    decodeBfloat16(new Uint16Array(bytes.buffer, 0, count), floats);
    return floats;
  };
  const accumulator = contribution(0).slice();
  for (let peer = 1; peer < size; peer++) reduceInto(accumulator, contribution(peer), reduceOp);
  if (reduceOp === 'avg') finishAverage(accumulator as Float32Array, size);
  if (options.roundFinal) roundToBfloat16InPlace(accumulator as Float32Array);
  await Promise.all(links.map((link) => link?.flushed()));
  work.set(accumulator as never);
}

/** Whether `output` is exactly block `rank` of `input` (an in-place reduce-scatter). */
function isOwnBlock(output: WorkArray, input: WorkArray, rank: number): boolean {
  return (
    output.buffer === input.buffer &&
    output.BYTES_PER_ELEMENT === input.BYTES_PER_ELEMENT &&
    output.byteOffset === input.byteOffset + rank * output.byteLength
  );
}

/** Work arrays at most this large are kept however long the engine idles. */
export const KEPT_WORK_BYTES = 32 << 20;
/** A larger one is dropped once no op has used it for this long. */
export const WORK_RELEASE_IDLE_MS = 250;

/**
 * [Note: work arrays dropped when idle]
 * Reusable float32 and int32 arrays for reductions that cannot run on the caller's buffer (a
 * reduce-scatter's partial sums, a bfloat16 op's float32 values). They grow to the largest op
 * and are kept for the next. One larger than KEPT_WORK_BYTES (a 1.3 B GPT's block
 * reduce-scattered out of place is 192 MiB) is dropped when the engine has been idle for
 * WORK_RELEASE_IDLE_MS after an op (`releaseLargeWhenIdle`): ops back to back (a benchmark) keep
 * it, while memory a step's reductions needed is not held through the forward and optimizer
 * step that follow. Allocating it again costs first-touch page faults, about 0.5 s for 192 MiB
 * on the 2-core test machine (an in-place reduce-scatter needs none: it reduces inside its
 * input). Any use cancels a pending drop, and the
 * drop only replaces the array, so an op holding it keeps its view.
 */
export class WorkArrays {
  private floats = new Float32Array(0);
  private ints = new Int32Array(0);
  private releaseTimer: NodeJS.Timeout | undefined;

  /** After an op, once nothing of it is pending: drops large arrays if no op uses them soon. */
  releaseLargeWhenIdle(): void {
    if (this.floats.byteLength <= KEPT_WORK_BYTES && this.ints.byteLength <= KEPT_WORK_BYTES) return;
    clearTimeout(this.releaseTimer);
    this.releaseTimer = setTimeout(() => this.releaseLarge(), WORK_RELEASE_IDLE_MS);
    this.releaseTimer.unref();
  }

  /** Drops the arrays larger than KEPT_WORK_BYTES now. */
  releaseLarge(): void {
    clearTimeout(this.releaseTimer);
    this.releaseTimer = undefined;
    if (this.floats.byteLength > KEPT_WORK_BYTES) this.floats = new Float32Array(0);
    if (this.ints.byteLength > KEPT_WORK_BYTES) this.ints = new Int32Array(0);
  }

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

  scratchFor(like: Float32Array | Int32Array): Float32Array | Int32Array {
    return like instanceof Int32Array ? this.intScratch(like.length) : this.floatScratch(like.length);
  }

  floatScratch(length: number): Float32Array {
    clearTimeout(this.releaseTimer);
    if (this.floats.length < length) this.floats = new Float32Array(length);
    return this.floats.subarray(0, length);
  }

  private intScratch(length: number): Int32Array {
    clearTimeout(this.releaseTimer);
    if (this.ints.length < length) this.ints = new Int32Array(length);
    return this.ints.subarray(0, length);
  }
}
