import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { OpMessage } from './op-message.js';

/**
 * [Note: the communication worker returns shared buffers]
 * An op reaches the communication worker as a message holding views of the caller's
 * SharedArrayBuffers, and a SharedArrayBuffer's memory is freed only once every thread that saw
 * it has collected its objects. The worker allocates almost nothing, so its collector may not run
 * for a long time, and every buffer an op named stays alive however soon the caller frees it: in
 * a probe, 8 freed 192 MiB buffers sent to a worker stayed resident (1.5 GiB) until the worker
 * ran a minor collection (then 54 MiB). FSDP gathers and frees a buffer that size per unit of a
 * 1.3 B GPT. So once the ops run since the last collection named MINOR_COLLECTION_BYTES of
 * buffers, the worker runs a minor collection between ops, never while one runs: 0.06–0.14 ms
 * for a 23 MiB heap here, where a full one took 13–20 ms. An op message promoted to the old
 * generation (an op that outlives scavenges) still waits for the worker's own full collection.
 * (`gc({ type: 'major' })` does nothing on Node 20's V8; `gc()` is the full one.) Where the
 * collector cannot be reached this does nothing.
 */
export const MINOR_COLLECTION_BYTES = 64 << 20;

type Collector = (options?: { type: 'minor' }) => void;

function collector(): Collector | undefined {
  try {
    setFlagsFromString('--expose-gc');
    return runInNewContext('gc') as Collector;
  } catch {
    return undefined;
  }
}

export class SharedBufferRelease {
  readonly #collect = collector();
  #sinceCollection = 0;

  /** An op is done: counts the bytes of the buffers it named. */
  ran(op: OpMessage): void {
    this.#sinceCollection += (op.input?.byteLength ?? 0) + (op.output?.byteLength ?? 0);
  }

  /** Between ops (no op's message referenced): collects when enough bytes went by. */
  collectIfDue(): void {
    if (this.#collect === undefined || this.#sinceCollection < MINOR_COLLECTION_BYTES) return;
    this.#collect({ type: 'minor' });
    this.#sinceCollection = 0;
  }
}
