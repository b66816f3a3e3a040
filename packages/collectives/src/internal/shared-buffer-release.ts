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
 * buffers, the worker runs a minor collection (a short op's message is still young; well under a
 * millisecond for its small heap), and a full one every FULL_COLLECTION_BYTES (an op that runs
 * for seconds may outlive scavenges and have its message promoted), between ops, never while one
 * runs. A full collection of the worker's few MiB
 * of heap takes milliseconds, so back-to-back 16 MiB all-reduces (about 8 ms each here) pay one
 * every 16 ops: an estimate of about 2%, not yet measured by the collectives benchmark. Where
 * the collector cannot be reached this does nothing.
 */
export const MINOR_COLLECTION_BYTES = 64 << 20;
export const FULL_COLLECTION_BYTES = 256 << 20;

type Collector = (options?: { type: 'minor' | 'major' }) => void;

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
  #sinceMinor = 0;
  #sinceFull = 0;

  /** An op is done: counts the bytes of the buffers it named. */
  ran(op: OpMessage): void {
    const bytes = (op.input?.byteLength ?? 0) + (op.output?.byteLength ?? 0);
    this.#sinceMinor += bytes;
    this.#sinceFull += bytes;
  }

  /** Between ops (no op's message referenced): collects when enough bytes went by. */
  collectIfDue(): void {
    if (this.#collect === undefined || this.#sinceMinor < MINOR_COLLECTION_BYTES) return;
    const full = this.#sinceFull >= FULL_COLLECTION_BYTES;
    this.#collect({ type: full ? 'major' : 'minor' });
    this.#sinceMinor = 0;
    if (full) this.#sinceFull = 0;
  }
}
