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
 * The reader thread's program (plain JavaScript, so it runs from source and from the build alike).
 * Requests arrive as messages; each completes by writing its results into shared memory and
 * bumping `done` (Atomics), so the main thread can wait for it inside a synchronous
 * `optimizer.step()`. 'verify' reads chunks into the thread's own scratch and records each one's
 * CRC-32; 'read' reads one chunk into a shared resident buffer and records its CRC-32.
 */
const readerProgram = `
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
const messageBytes = new Uint8Array(workerData.message);
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
  let status = 0;
  let message = '';
  try {
    if (request.op === 'verify') {
      for (let chunk = 0; chunk < request.lengths.length; chunk++) {
        const length = request.lengths[chunk];
        if (scratch.byteLength < length) scratch = new Uint8Array(length);
        const bytes = scratch.subarray(0, length);
        const read = readInto(request.fd, bytes, request.positions[chunk]);
        if (read < length) { status = 2; message = 'chunk ' + chunk + ' ends after ' + read + ' of ' + length + ' bytes'; break; }
        results[chunk] = crc32(bytes);
      }
    } else {
      const bytes = new Uint8Array(request.buffer, request.byteOffset, request.length);
      const read = readInto(request.fd, bytes, request.position);
      results[request.resultSlot] = crc32(bytes);
      if (read < request.length) { status = 2; message = 'ends after ' + read + ' of ' + request.length + ' bytes'; }
    }
  } catch (error) {
    status = 3;
    message = String(error && error.code ? error.code + ': ' + error.message : error);
  }
  timing[0] += performance.now() - started;
  timing[1] += request.op === 'verify' ? request.lengths.reduce((a, b) => a + b, 0) : request.length;
  if (status !== 0) {
    messageBytes.fill(0);
    messageBytes.set(new TextEncoder().encode(message).subarray(0, messageBytes.byteLength - 1));
  }
  Atomics.store(control, 1, status);
  Atomics.store(control, 0, request.sequence);
  Atomics.notify(control, 0);
});
`;

/** A finished request: the CRC-32s read, or why the read failed. */
export type ReaderOutcome = { ok: true; checksums: Uint32Array } | { ok: false; message: string };

/**
 * [Note: offload reader thread]
 * One thread per disk store reads chunks while the main thread does something else: the whole
 * current slot (verify) while backward runs, and the next chunk while the optimizer steps this
 * one. One request at a time; `wait` blocks the main thread (Atomics.wait) until it is done.
 * The thread is unref'd (it never keeps a process alive) and ended by `close`.
 */
export class ChunkReader {
  readonly #worker: Worker;
  readonly #control = new Int32Array(new SharedArrayBuffer(8));
  readonly #results: Uint32Array;
  /** [0]: ms the thread spent reading and checksumming; [1]: bytes it read. */
  readonly timing = new Float64Array(new SharedArrayBuffer(16));
  #sequence = 0;
  #pending: 'none' | 'verify' | 'read' = 'none';
  /** UTF-8, zero-terminated: why the last request failed. */
  readonly #message = new Uint8Array(new SharedArrayBuffer(1024));

  constructor(chunks: number) {
    this.#results = new Uint32Array(new SharedArrayBuffer(4 * Math.max(1, chunks)));
    this.#worker = new Worker(readerProgram, {
      eval: true,
      workerData: {
        control: this.#control.buffer,
        results: this.#results.buffer,
        timing: this.timing.buffer,
        message: this.#message.buffer,
      },
    });
    this.#worker.unref();
  }

  get pending(): 'none' | 'verify' | 'read' {
    return this.#pending;
  }

  startVerify(descriptor: number, positions: readonly number[], lengths: readonly number[]): void {
    this.#post('verify', { fd: descriptor, positions: [...positions], lengths: [...lengths] });
  }

  /** Reads `length` bytes at `position` into `into` (a view of a SharedArrayBuffer). */
  startRead(descriptor: number, position: number, into: Uint8Array): void {
    this.#post('read', {
      fd: descriptor,
      position,
      length: into.byteLength,
      buffer: into.buffer,
      byteOffset: into.byteOffset,
      resultSlot: 0,
    });
  }

  /** Waits for the request in flight. */
  wait(): ReaderOutcome {
    if (this.#pending === 'none') throw new Error('ChunkReader.wait: nothing in flight');
    while (Atomics.load(this.#control, 0) !== this.#sequence) {
      Atomics.wait(this.#control, 0, this.#sequence - 1, 60_000);
    }
    this.#pending = 'none';
    if (Atomics.load(this.#control, 1) === 0) return { ok: true, checksums: this.#results };
    const end = this.#message.indexOf(0);
    return {
      ok: false,
      message: new TextDecoder().decode(this.#message.slice(0, end < 0 ? undefined : end)),
    };
  }

  close(): void {
    void this.#worker.terminate();
  }

  #post(op: 'verify' | 'read', request: Record<string, unknown>): void {
    if (this.#pending !== 'none') throw new Error(`ChunkReader: ${op} while ${this.#pending} is in flight`);
    this.#sequence += 1;
    this.#pending = op;
    this.#worker.postMessage({ op, sequence: this.#sequence, ...request });
  }
}
