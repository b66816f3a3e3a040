import { Worker } from 'node:worker_threads';
import * as zlib from 'node:zlib';

/**
 * CRC-32 (IEEE, zlib's) of `bytes`: node:zlib's `crc32` (Node 20.15+), else the same function in
 * JavaScript.
 */
export const crc32: (bytes: Uint8Array) => number =
  typeof (zlib as { crc32?: unknown }).crc32 === 'function'
    ? (bytes) => (zlib as unknown as { crc32(bytes: Uint8Array): number }).crc32(bytes)
    : tableCrc32;

let table: Uint32Array | null = null;

/** CRC-32 in JavaScript (the fallback; exported for its test). */
export function tableCrc32(bytes: Uint8Array): number {
  if (table === null) {
    table = new Uint32Array(256);
    for (let entry = 0; entry < 256; entry++) {
      let value = entry;
      for (let bit = 0; bit < 8; bit++) value = value & 1 ? 0xedb88320 ^ (value >>> 1) : value >>> 1;
      table[entry] = value >>> 0;
    }
  }
  let crc = 0xffffffff;
  for (const byte of bytes) crc = table[(crc ^ byte) & 0xff]! ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

/**
 * The I/O thread's program (plain JavaScript, so it runs from source and from the build alike).
 * Requests arrive as messages and run one after another in the order posted (a worker handles
 * its messages in order); each completes by recording its results in shared memory and setting
 * `control[0]` to its sequence number (Atomics), so the main thread can wait for it inside a
 * synchronous `optimizer.step()`. 'verify' reads chunks into the thread's own scratch and records
 * each one's CRC-32; 'read' reads one chunk into a shared buffer and records its CRC-32; 'write'
 * records the CRC-32 of a shared buffer and writes it, with an fdatasync every `syncBytes` per
 * file ([Note: bounded dirty pages] in @fsdp-ts/checkpoint). Each request names a request slot:
 * its CRC-32s go to `results` there (a verification's to [0, chunks)), its status to `status`
 * (0 done, 1 failed) and a failure's JSON (code, message) to that slot's part of `messages`.
 */
const threadProgram = `
const { parentPort, workerData } = require('node:worker_threads');
const fs = require('node:fs');
const zlib = require('node:zlib');
let table = null;
function crc32(bytes) {
  if (typeof zlib.crc32 === 'function') return zlib.crc32(bytes);
  if (table === null) {
    table = new Uint32Array(256);
    for (let n = 0; n < 256; n++) { let c = n; for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1; table[n] = c >>> 0; }
  }
  let crc = 0xffffffff;
  for (let i = 0; i < bytes.length; i++) crc = table[(crc ^ bytes[i]) & 0xff] ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}
const control = new Int32Array(workerData.control);
const results = new Uint32Array(workerData.results);
const timing = new Float64Array(workerData.timing);
const status = new Int32Array(workerData.status);
const messages = new Uint8Array(workerData.messages);
const messageBytes = workerData.messageBytes;
const unsynced = new Map();
// Kept across verifications: one made per verification would wait for this thread's rarely
// run collector (see the resident buffers in offloaded-optimizer-state.ts).
let scratch = new Uint8Array(0);
function readInto(fd, bytes, position) {
  let done = 0;
  while (done < bytes.byteLength) {
    const read = fs.readSync(fd, bytes, done, bytes.byteLength - done, position + done);
    if (read === 0) break;
    done += read;
  }
  return done;
}
parentPort.on('message', (request) => {
  const started = performance.now();
  let failure = null;
  try {
    if (request.op === 'verify') {
      for (let chunk = 0; chunk < request.lengths.length; chunk++) {
        const length = request.lengths[chunk];
        if (scratch.byteLength < length) scratch = new Uint8Array(length);
        const bytes = scratch.subarray(0, length);
        const read = readInto(request.fd, bytes, request.positions[chunk]);
        if (read < length) { failure = { code: 'short', message: 'chunk ' + chunk + ' ends after ' + read + ' of ' + length + ' bytes' }; break; }
        results[chunk] = crc32(bytes);
      }
    } else if (request.op === 'read') {
      const bytes = new Uint8Array(request.buffer, request.byteOffset, request.length);
      const read = readInto(request.fd, bytes, request.position);
      results[request.resultSlot] = crc32(bytes);
      if (read < request.length) failure = { code: 'short', message: 'ends after ' + read + ' of ' + request.length + ' bytes' };
    } else {
      const bytes = new Uint8Array(request.buffer, request.byteOffset, request.length);
      results[request.resultSlot] = crc32(bytes);
      let done = 0;
      while (done < bytes.byteLength) done += fs.writeSync(request.fd, bytes, done, bytes.byteLength - done, request.position + done);
      const pending = (unsynced.get(request.fd) || 0) + bytes.byteLength;
      if (pending >= request.syncBytes) { fs.fdatasyncSync(request.fd); unsynced.set(request.fd, 0); }
      else unsynced.set(request.fd, pending);
    }
  } catch (error) {
    failure = { code: error && error.code ? String(error.code) : 'error', message: String(error && error.message ? error.message : error) };
  }
  const elapsed = performance.now() - started;
  if (request.op === 'write') { timing[2] += elapsed; timing[3] += request.length; }
  else { timing[0] += elapsed; timing[1] += request.op === 'verify' ? request.lengths.reduce((a, b) => a + b, 0) : request.length; }
  if (failure !== null) {
    const text = messages.subarray(request.slot * messageBytes, (request.slot + 1) * messageBytes);
    text.fill(0);
    text.set(new TextEncoder().encode(JSON.stringify(failure)).subarray(0, messageBytes - 1));
  }
  Atomics.store(status, request.slot, failure === null ? 0 : 1);
  Atomics.store(control, 0, request.sequence);
  Atomics.notify(control, 0);
});
`;

/** Why a request failed: the system error code ('ENOSPC', …; 'short' for a read past the end) and message. */
export interface ThreadFailure {
  code: string;
  message: string;
}

const MESSAGE_BYTES = 512;

/**
 * [Note: offload I/O thread]
 * One thread per disk store reads and writes chunks while the main thread does something else:
 * the whole current slot (verify) while backward runs; during the optimizer step the next chunk
 * (read) and the chunk just stepped (write) while the optimizer steps the one between. Requests
 * queue and run in the order posted, so a buffer posted for writing is written before a later read
 * into the same buffer begins: that order, not a lock, is what lets the step reuse its two chunk
 * buffers. Each request in flight holds one of `requestSlots` slots for its results (a
 * verification holds `verifySlot`). `waitFor(sequence)` blocks the main thread (Atomics.wait) until that request and every
 * earlier one are done. The thread is unref'd (it never keeps a process alive), ended by `close`.
 */
export class ChunkIoThread {
  readonly #worker: Worker;
  readonly #control = new Int32Array(new SharedArrayBuffer(4));
  /** CRC-32s: [0, chunks) for a verification, then one per request slot. */
  readonly results: Uint32Array;
  /** Request slots for reads and writes: 0 ≤ slot < requestSlots; `verifySlot` is the verification's. */
  readonly requestSlots: number;
  readonly verifySlot: number;
  readonly #firstRequestSlot: number;
  readonly #status: Int32Array;
  readonly #messages: Uint8Array;
  /** [0]: ms reading and checksumming; [1]: bytes read; [2]: ms writing (checksums, fdatasync); [3]: bytes written. */
  readonly timing = new Float64Array(new SharedArrayBuffer(32));
  #sequence = 0;

  constructor(chunks: number, requestSlots = 8) {
    this.#firstRequestSlot = Math.max(1, chunks);
    this.requestSlots = requestSlots;
    this.verifySlot = requestSlots;
    this.results = new Uint32Array(new SharedArrayBuffer(4 * (this.#firstRequestSlot + requestSlots)));
    this.#status = new Int32Array(new SharedArrayBuffer(4 * (requestSlots + 1)));
    this.#messages = new Uint8Array(new SharedArrayBuffer(MESSAGE_BYTES * (requestSlots + 1)));
    this.#worker = new Worker(threadProgram, {
      eval: true,
      workerData: {
        control: this.#control.buffer,
        results: this.results.buffer,
        timing: this.timing.buffer,
        status: this.#status.buffer,
        messages: this.#messages.buffer,
        messageBytes: MESSAGE_BYTES,
      },
    });
    this.#worker.unref();
  }

  /** The sequence number of the last request posted (0: none yet). */
  get posted(): number {
    return this.#sequence;
  }

  /** Whether every posted request is done. */
  get idle(): boolean {
    return Atomics.load(this.#control, 0) === this.#sequence;
  }

  /** Index in `results` of request slot `slot` (0 ≤ slot < requestSlots). */
  resultIndex(slot: number): number {
    return this.#firstRequestSlot + slot;
  }

  startVerify(descriptor: number, positions: readonly number[], lengths: readonly number[]): number {
    return this.#post({
      op: 'verify',
      fd: descriptor,
      positions: [...positions],
      lengths: [...lengths],
      slot: this.verifySlot,
    });
  }

  /** Reads `into.byteLength` bytes at `position` into `into` (a view of a SharedArrayBuffer). */
  startRead(descriptor: number, position: number, into: Uint8Array, slot: number): number {
    return this.#post({
      op: 'read',
      fd: descriptor,
      position,
      length: into.byteLength,
      buffer: into.buffer,
      byteOffset: into.byteOffset,
      resultSlot: this.resultIndex(slot),
      slot,
    });
  }

  /** Writes `from` (a view of a SharedArrayBuffer, unchanged until done) at `position`. */
  startWrite(
    descriptor: number,
    position: number,
    from: Uint8Array,
    slot: number,
    syncBytes: number,
  ): number {
    return this.#post({
      op: 'write',
      fd: descriptor,
      position,
      length: from.byteLength,
      buffer: from.buffer,
      byteOffset: from.byteOffset,
      resultSlot: this.resultIndex(slot),
      slot,
      syncBytes,
    });
  }

  /** Waits until request `sequence` and every earlier one are done. */
  waitFor(sequence: number): void {
    while (Atomics.load(this.#control, 0) < sequence) {
      Atomics.wait(this.#control, 0, Atomics.load(this.#control, 0), 60_000);
    }
  }

  /** Why the last request done in request slot `slot` failed, or null if it succeeded. */
  outcome(slot: number): ThreadFailure | null {
    if (Atomics.load(this.#status, slot) === 0) return null;
    const bytes = this.#messages.subarray(slot * MESSAGE_BYTES, (slot + 1) * MESSAGE_BYTES);
    const end = bytes.indexOf(0);
    const text = new TextDecoder().decode(bytes.slice(0, end < 0 ? undefined : end));
    try {
      return JSON.parse(text) as ThreadFailure;
    } catch {
      return { code: 'error', message: text };
    }
  }

  close(): void {
    void this.#worker.terminate();
  }

  #post(request: Record<string, unknown>): number {
    this.#sequence += 1;
    this.#worker.postMessage({ sequence: this.#sequence, ...request });
    return this.#sequence;
  }
}
