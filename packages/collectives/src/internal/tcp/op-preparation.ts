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

/** An op prepared before its header check (see [Note: eager first segment]). */
export interface PreparedOp {
  /** Bytes sent right behind the header: to the next rank only, or to every peer. */
  eager: { toNext: Uint8Array | null; toAll: Uint8Array | null };
  /** The rest of the op, after every header matched (on node:net). */
  rest: (previous: PeerLink | null, next: PeerLink | null) => Promise<void>;
  /** A ring schedule's plan and what follows it, for the native data path. */
  ring?: { plan: RingPlan; after?: () => void };
}

/**
 * Turns an op into what the tcp engine runs: its eager bytes and the rest, as a ring plan (for
 * the native data path or node:net) or the direct exchange of small all-reduces. One per engine;
 * it owns no state of its own beyond the engine's reusable memory it is given.
 */
export class OpPreparation {
  constructor(
    private readonly rank: number,
    private readonly size: number,
    private readonly scratch: RingScratch,
    private readonly work: WorkArrays,
    private readonly links: readonly (PeerLink | null)[],
  ) {}

  /** What an op does before its header check (its eager bytes), and the rest, run after it. */
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
        } else {
          // No copy of the input: each reduce step writes input (op) incoming into scratch.
          plan = reduceScatterPlan(
            this.work.scratchFor(input as Float32Array | Int32Array),
            op.count,
            options,
          );
          plan.base = input;
          if (op.wireDtype === 'bfloat16' && size > 1) {
            // The last reduce step writes this rank's block straight into the output
            // ([Note: results in place] in ring.ts): nothing to copy afterwards.
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
          // [Note: bfloat16 all-gather own block] One pass over the input writes the bytes this
          // rank sends first and its own block of the output (the input rounded to bfloat16,
          // the values every peer receives), instead of a copy, a rounding pass and an encode.
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
   * A ring plan over a bfloat16 buffer's values (`input`, default `bits`), whose results land
   * as bfloat16 in `bits` from element `offset` of the work array on ([Note: results in
   * place] in ring.ts). The work array gets the decoded input except the initial range, which this
   * rank only sends, straight from the input's bytes (exact in bfloat16), and never reads.
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
 * The latency-optimal all-reduce for small buffers: every rank sends its whole buffer to every
 * peer (one step instead of the ring's 2(size-1)), then each reduces all contributions in rank
 * order, so all ranks compute the same bits. The payload goes out right behind the op header
 * ([Note: eager first segment] in node-net-frames.ts).
 */

/** What a direct all-reduce sends to every peer (after rounding `work` for a bfloat16 wire). */
export function directAllReducePayload(
  work: Float32Array | Int32Array,
  options: ReducePlanOptions,
  scratch: RingScratch,
): Uint8Array {
  if (options.reduceWire === 'bfloat16') roundToBfloat16InPlace(work as Float32Array);
  return encodeRange(work, 0, work.length, options.reduceWire, scratch);
}

/** The rest of a direct all-reduce once `payload` went to every peer: receive and reduce. */
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
