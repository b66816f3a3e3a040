import { decodeBfloat16, finishAverage, reduceInto, roundToBfloat16InPlace } from '@fsdp-ts/kernels';
import type { PeerLink } from './peer-link.js';
import { encodeRange, type RingScratch } from './ring.js';
import type { ReducePlanOptions } from './ring-plans.js';

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
      let filled = 0;
      await link.read(bytes.length, (chunk) => {
        bytes.set(chunk, filled);
        filled += chunk.length;
      });
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
