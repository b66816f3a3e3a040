import {
  decodeBfloat16,
  encodeBfloat16,
  encodeRoundBfloat16,
  roundToBfloat16InPlace,
} from '@fsdp-ts/kernels';
import type { OpMessage } from '../op-message.js';
import { directAllReducePayload, finishDirectAllReduce } from './direct-all-reduce.js';
import type { PeerLink } from './peer-link.js';
import { initialBytes, type RingPlan, type RingScratch, type Wire } from './ring.js';
import {
  allGatherPlan,
  allReducePlan,
  broadcastPlan,
  type ReducePlanOptions,
  reduceScatterPlan,
} from './ring-plans.js';
import { runRingSteps } from './ring-steps.js';
import type { WorkArrays } from './work-arrays.js';

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
