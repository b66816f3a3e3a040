import {
  closeSync,
  fdatasyncSync,
  mkdirSync,
  openSync,
  readSync,
  rmdirSync,
  statfsSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import { FsdpError } from '../errors';
import { ChunkIoThread, crc32, type ThreadFailure } from './chunk-io-thread';

/** What offload I/O cost in the last optimizer step (see FullyShardedDataParallel.offloadStatistics). */
export interface OffloadStatistics {
  /** Wall time the main thread spent in read calls (disk) or copies out of the host buffer (memory). */
  readMs: number;
  /** Wall time the main thread waited for the I/O thread (prefetched reads not done yet). */
  waitMs: number;
  /**
   * Wall time the I/O thread spent reading and checksumming (disk): the whole slot's
   * verification while backward ran, and each next chunk while the optimizer stepped one.
   * Overlapped with the main thread except for `waitMs`.
   */
  readerMs: number;
  /** Wall time the main thread spent in write calls and fdatasync (disk) or copies into the host buffer (memory). */
  writeMs: number;
  /**
   * Wall time the I/O thread spent checksumming and writing the chunks the optimizer stepped
   * (disk), overlapped with the step of the next chunk except for `waitMs`.
   */
  writerMs: number;
  /** Wall time computing CRC-32s of chunks read and written. */
  checksumMs: number;
  bytesRead: number;
  bytesWritten: number;
}

export function emptyOffloadStatistics(): OffloadStatistics {
  return {
    readMs: 0,
    waitMs: 0,
    readerMs: 0,
    writeMs: 0,
    writerMs: 0,
    checksumMs: 0,
    bytesRead: 0,
    bytesWritten: 0,
  };
}

export function resetOffloadStatistics(statistics: OffloadStatistics): void {
  Object.assign(statistics, emptyOffloadStatistics());
}

/** Two slots (0 and 1), each the same chunks of float32 elements; chunk c is [offsets[c], offsets[c + 1]). */
export interface SlotStore {
  readonly kind: 'memory' | 'disk';
  /** Creates both slots as zeros (throws FsdpError 'offload-failed' on a full disk; nothing is left behind). */
  allocate(): void;
  /** Reads chunk `chunk` of `slot` into `into` and verifies it. */
  read(slot: 0 | 1, chunk: number, into: Float32Array): void;
  /** Writes `from` as chunk `chunk` of `slot` (durable after `flush`). */
  write(slot: 0 | 1, chunk: number, from: Float32Array): void;
  /**
   * Starts writing `from` (a view of shared memory, left unchanged until a later read into it or
   * `finishWrites`) as chunk `chunk` of `slot` on the I/O thread (disk; `write` otherwise).
   */
  startWrite(slot: 0 | 1, chunk: number, from: Float32Array): void;
  /** Waits for the writes started; throws the first that failed. */
  finishWrites(): void;
  /** Starts verifying every chunk of `slot` on the I/O thread (disk; a no-op otherwise). */
  prefetchVerify(slot: 0 | 1): void;
  /** Verifies every chunk of `slot` (the prefetched verification when one is in flight for it). */
  verify(slot: 0 | 1, scratch: Float32Array): void;
  /** Starts reading chunk `chunk` of `slot` into `into` (a view of shared memory) on the I/O thread. */
  startRead(slot: 0 | 1, chunk: number, into: Float32Array): void;
  /** Finishes what startRead began (verifying the chunk). */
  finishRead(slot: 0 | 1, chunk: number, into: Float32Array): void;
  /** Waits for anything in flight on the I/O thread, ignoring its outcome (error paths; before the main thread's own I/O). */
  drain(): void;
  /** Makes what was written to `slot` durable. */
  flush(slot: 0 | 1): void;
  /** Frees the slots (files removed). */
  release(): void;
}

/**
 * [Note: offload slots]
 * A rank's offloaded optimizer state lives in two slots of identical layout. One is current; a
 * step reads it and writes the new chunks into the other, which becomes current only after every
 * rank agrees the step succeeded (offloaded-optimizer-state.ts). A failed step leaves the current
 * slot as it was, so the state before it stays valid: the next step retries from there.
 */
export function createSlotStore(
  kind: 'memory' | 'disk',
  offsets: readonly number[],
  place: { directory: string | null; rank: number; syncBytes: number; contents?: StoreContents },
  statistics: OffloadStatistics,
): SlotStore {
  if (kind === 'memory') return new HostSlotStore(offsets, statistics);
  return new DiskSlotStore(
    offsets,
    join(place.directory!, `rank-${place.rank}`),
    place.syncBytes,
    statistics,
    place.contents ?? 'optimizer-state',
  );
}

/** What a disk store holds: its files are `<contents>-0.bin` and `-1.bin`, its messages name it. */
export type StoreContents = 'optimizer-state' | 'parameters';

const contentsLabel: Record<StoreContents, string> = {
  'optimizer-state': 'Offloaded optimizer state',
  parameters: 'Offloaded parameters',
};

/** 'memory': two host buffers apart from the model's. */
class HostSlotStore implements SlotStore {
  readonly kind = 'memory';
  #slots: [Float32Array, Float32Array] | null = null;

  constructor(
    private readonly offsets: readonly number[],
    private readonly statistics: OffloadStatistics,
  ) {}

  allocate(): void {
    const total = this.offsets[this.offsets.length - 1]!;
    this.#slots = [new Float32Array(total), new Float32Array(total)];
  }

  read(slot: 0 | 1, chunk: number, into: Float32Array): void {
    const started = performance.now();
    into.set(this.#slots![slot].subarray(this.offsets[chunk]!, this.offsets[chunk + 1]!));
    this.statistics.readMs += performance.now() - started;
    this.statistics.bytesRead += into.byteLength;
  }

  write(slot: 0 | 1, chunk: number, from: Float32Array): void {
    const started = performance.now();
    this.#slots![slot].set(from, this.offsets[chunk]!);
    this.statistics.writeMs += performance.now() - started;
    this.statistics.bytesWritten += from.byteLength;
  }

  startWrite(slot: 0 | 1, chunk: number, from: Float32Array): void {
    this.write(slot, chunk, from);
  }

  finishWrites(): void {}

  prefetchVerify(): void {}

  verify(): void {}

  startRead(): void {}

  finishRead(slot: 0 | 1, chunk: number, into: Float32Array): void {
    this.read(slot, chunk, into);
  }

  drain(): void {}

  flush(): void {}

  release(): void {
    this.#slots = null;
  }
}

/** What a disk store holds open, closed when the store is collected without release(). */
interface OpenResources {
  thread: ChunkIoThread | null;
  descriptors: [number, number] | null;
}

/**
 * A model dropped without releasing its offload (FSDP has no destroy) must not keep its I/O
 * thread and file descriptors: they are closed when the store is garbage collected.
 */
const openStores = new FinalizationRegistry<OpenResources>((resources) => {
  resources.thread?.close();
  for (const descriptor of resources.descriptors ?? []) {
    try {
      if (descriptor >= 0) closeSync(descriptor);
    } catch {
      // already closed
    }
  }
});

/** A request on the I/O thread not yet settled by the main thread. */
interface InFlight {
  sequence: number;
  op: 'verify' | 'read' | 'write';
  slot: 0 | 1;
  chunk: number;
  /** Its request slot on the thread (ChunkIoThread.verifySlot for a verification). */
  requestSlot: number;
}

/**
 * 'disk': `rank-<r>/optimizer-state-0.bin` and `-1.bin`, raw little-endian float32, chunk c at
 * byte 4·offsets[c]. Each chunk's CRC-32 is recorded when it is written and checked on every read
 * (a changed byte is an error naming the file and the chunk). Writes go one chunk at a time, on
 * the main thread (`write`) or the I/O thread (`startWrite`, the step's), with an fdatasync every
 * `syncBytes` ([Note: bounded dirty pages] in @fsdp-ts/checkpoint's rank-file-writer.ts): page
 * cache a write dirties is charged to the rank's memory cgroup. A thread write's CRC-32 is
 * recorded when the main thread settles it (`#complete`), before any read of that chunk is checked.
 */
class DiskSlotStore implements SlotStore {
  readonly kind = 'disk';
  readonly files: readonly [string, string];
  #descriptors: [number, number] | null = null;
  readonly #checksums: [Uint32Array, Uint32Array];
  readonly #unsynced: [number, number] = [0, 0];
  #thread: ChunkIoThread | null = null;
  readonly #resources: OpenResources = { thread: null, descriptors: null };
  /** Requests posted to the thread, oldest first, not yet settled. */
  #inFlight: InFlight[] = [];
  /** The thread's timing already counted in `statistics`. */
  readonly #counted = [0, 0, 0, 0];

  constructor(
    private readonly offsets: readonly number[],
    readonly directory: string,
    private readonly syncBytes: number,
    private readonly statistics: OffloadStatistics,
    private readonly contents: StoreContents = 'optimizer-state',
  ) {
    this.files = [join(directory, `${contents}-0.bin`), join(directory, `${contents}-1.bin`)];
    const chunks = offsets.length - 1;
    this.#checksums = [new Uint32Array(chunks), new Uint32Array(chunks)];
    openStores.register(this, this.#resources);
  }

  allocate(): void {
    this.release();
    this.#thread = new ChunkIoThread(this.offsets.length - 1);
    this.#resources.thread = this.#thread;
    const chunks = this.offsets.length - 1;
    let largest = 0;
    for (let chunk = 0; chunk < chunks; chunk++)
      largest = Math.max(largest, this.offsets[chunk + 1]! - this.offsets[chunk]!);
    const zeros = new Float32Array(largest);
    try {
      mkdirSync(this.directory, { recursive: true });
      const descriptors: [number, number] = [openSync(this.files[0], 'w+'), -1];
      this.#descriptors = descriptors;
      this.#resources.descriptors = descriptors;
      descriptors[1] = openSync(this.files[1], 'w+');
      for (const slot of [0, 1] as const) {
        for (let chunk = 0; chunk < chunks; chunk++) {
          this.write(slot, chunk, zeros.subarray(0, this.offsets[chunk + 1]! - this.offsets[chunk]!));
        }
        this.flush(slot);
      }
    } catch (error) {
      this.release();
      throw error;
    }
  }

  read(slot: 0 | 1, chunk: number, into: Float32Array): void {
    this.drain();
    const bytes = new Uint8Array(into.buffer, into.byteOffset, into.byteLength);
    const position = this.offsets[chunk]! * 4;
    const started = performance.now();
    let done = 0;
    try {
      while (done < bytes.byteLength) {
        const read = readSync(this.#descriptor(slot), bytes, done, bytes.byteLength - done, position + done);
        if (read === 0) break;
        done += read;
      }
    } catch (error) {
      throw this.#ioError('read', slot, chunk, error);
    }
    const checked = performance.now();
    this.statistics.readMs += checked - started;
    this.statistics.bytesRead += done;
    if (done < bytes.byteLength) {
      throw this.#corrupt(
        slot,
        chunk,
        `ends after ${position + done} bytes (the chunk needs ${bytes.byteLength} from byte ${position})`,
      );
    }
    const actual = crc32(bytes);
    this.statistics.checksumMs += performance.now() - checked;
    this.#check(slot, chunk, actual);
  }

  prefetchVerify(slot: 0 | 1): void {
    if (this.#thread === null || this.#inFlight.length > 0) return;
    const positions: number[] = [];
    const lengths: number[] = [];
    for (let chunk = 0; chunk + 1 < this.offsets.length; chunk++) {
      positions.push(this.offsets[chunk]! * 4);
      lengths.push((this.offsets[chunk + 1]! - this.offsets[chunk]!) * 4);
    }
    const sequence = this.#thread.startVerify(this.#descriptor(slot), positions, lengths);
    this.#inFlight.push({ sequence, op: 'verify', slot, chunk: -1, requestSlot: this.#thread.verifySlot });
  }

  verify(slot: 0 | 1, scratch: Float32Array): void {
    const chunks = this.offsets.length - 1;
    const pending = this.#inFlight.find((request) => request.op === 'verify' && request.slot === slot);
    if (pending !== undefined) {
      const failure = this.#complete(pending);
      if (failure !== null) throw this.#corrupt(slot, 0, `could not be read: ${failure.message}`);
      for (let chunk = 0; chunk < chunks; chunk++) this.#check(slot, chunk, this.#thread!.results[chunk]!);
      return;
    }
    this.drain();
    for (let chunk = 0; chunk < chunks; chunk++) {
      this.read(slot, chunk, scratch.subarray(0, this.offsets[chunk + 1]! - this.offsets[chunk]!));
    }
  }

  startRead(slot: 0 | 1, chunk: number, into: Float32Array): void {
    // A verification in flight reads the whole slot: wait for it (its outcome is beginStep's).
    if (this.#inFlight.some((request) => request.op === 'verify')) this.drain();
    const requestSlot = this.#freeRequestSlot();
    const sequence = this.#thread!.startRead(
      this.#descriptor(slot),
      this.offsets[chunk]! * 4,
      new Uint8Array(into.buffer, into.byteOffset, into.byteLength),
      requestSlot,
    );
    this.#inFlight.push({ sequence, op: 'read', slot, chunk, requestSlot });
  }

  finishRead(slot: 0 | 1, chunk: number, into: Float32Array): void {
    const pending = this.#inFlight.find(
      (request) => request.op === 'read' && request.slot === slot && request.chunk === chunk,
    );
    if (pending === undefined) {
      this.read(slot, chunk, into);
      return;
    }
    const failure = this.#complete(pending);
    if (failure !== null) throw this.#corrupt(slot, chunk, failure.message);
    this.#check(slot, chunk, this.#thread!.results[this.#thread!.resultIndex(pending.requestSlot)]!);
  }

  startWrite(slot: 0 | 1, chunk: number, from: Float32Array): void {
    if (this.#thread === null || !(from.buffer instanceof SharedArrayBuffer)) {
      this.write(slot, chunk, from);
      return;
    }
    const requestSlot = this.#freeRequestSlot();
    const sequence = this.#thread.startWrite(
      this.#descriptor(slot),
      this.offsets[chunk]! * 4,
      new Uint8Array(from.buffer, from.byteOffset, from.byteLength),
      requestSlot,
      this.syncBytes,
    );
    this.#inFlight.push({ sequence, op: 'write', slot, chunk, requestSlot });
  }

  finishWrites(): void {
    const last = this.#inFlight.at(-1);
    if (last !== undefined) this.#complete(last);
  }

  drain(): void {
    const last = this.#inFlight.at(-1);
    if (last === undefined) return;
    try {
      this.#complete(last);
    } catch {
      // A failed write keeps its chunk's previous CRC-32, so the chunk is never read as valid new
      // state; a step only succeeds through finishRead/finishWrites, which throw it.
    }
  }

  /**
   * Waits until `request` (and everything posted before it) is done and settles them: each
   * write's CRC-32 is recorded (a failed write throws its error, after every request up to
   * `request` is settled); returns `request`'s own failure, if it was a read or a verification.
   */
  #complete(request: InFlight): ThreadFailure | null {
    const thread = this.#thread!;
    const started = performance.now();
    thread.waitFor(request.sequence);
    this.statistics.waitMs += performance.now() - started;
    this.#countTiming();
    let writeFailure: unknown;
    let own: ThreadFailure | null = null;
    while (this.#inFlight.length > 0 && this.#inFlight[0]!.sequence <= request.sequence) {
      const done = this.#inFlight.shift()!;
      const failure = thread.outcome(done.requestSlot);
      if (done.op === 'write') {
        if (failure === null)
          this.#checksums[done.slot][done.chunk] = thread.results[thread.resultIndex(done.requestSlot)]!;
        else writeFailure ??= this.#ioError('write', done.slot, done.chunk, asError(failure));
      } else if (done === request) own = failure;
    }
    if (writeFailure !== undefined) throw writeFailure;
    return own;
  }

  /** A request slot no request in flight holds (waiting for the oldest when all are held). */
  #freeRequestSlot(): number {
    const thread = this.#thread!;
    for (;;) {
      const held = new Set(this.#inFlight.map((request) => request.requestSlot));
      for (let slot = 0; slot < thread.requestSlots; slot++) if (!held.has(slot)) return slot;
      this.#complete(this.#inFlight[0]!);
    }
  }

  #countTiming(): void {
    const timing = this.#thread!.timing;
    this.statistics.readerMs += timing[0]! - this.#counted[0]!;
    this.statistics.bytesRead += timing[1]! - this.#counted[1]!;
    this.statistics.writerMs += timing[2]! - this.#counted[2]!;
    this.statistics.bytesWritten += timing[3]! - this.#counted[3]!;
    for (let index = 0; index < 4; index++) this.#counted[index] = timing[index]!;
  }

  #check(slot: 0 | 1, chunk: number, actual: number): void {
    const expected = this.#checksums[slot][chunk]!;
    if (actual !== expected) {
      throw this.#corrupt(slot, chunk, `has CRC-32 ${hex(actual)} where ${hex(expected)} was written`);
    }
  }

  write(slot: 0 | 1, chunk: number, from: Float32Array): void {
    this.drain();
    const bytes = new Uint8Array(from.buffer, from.byteOffset, from.byteLength);
    const started = performance.now();
    this.#checksums[slot][chunk] = crc32(bytes);
    const written = performance.now();
    this.statistics.checksumMs += written - started;
    const position = this.offsets[chunk]! * 4;
    const descriptor = this.#descriptor(slot);
    try {
      let done = 0;
      while (done < bytes.byteLength) {
        done += writeSync(descriptor, bytes, done, bytes.byteLength - done, position + done);
      }
      this.#unsynced[slot] += bytes.byteLength;
      if (this.#unsynced[slot] >= this.syncBytes) this.flush(slot);
    } catch (error) {
      throw this.#ioError('write', slot, chunk, error);
    }
    this.statistics.writeMs += performance.now() - written;
    this.statistics.bytesWritten += bytes.byteLength;
  }

  flush(slot: 0 | 1): void {
    this.finishWrites();
    const started = performance.now();
    try {
      fdatasyncSync(this.#descriptor(slot));
    } catch (error) {
      throw this.#ioError('write', slot, -1, error);
    }
    this.#unsynced[slot] = 0;
    this.statistics.writeMs += performance.now() - started;
  }

  release(): void {
    this.drain();
    this.#thread?.close();
    this.#thread = null;
    this.#resources.thread = null;
    this.#resources.descriptors = null;
    this.#counted.fill(0);
    if (this.#descriptors !== null) {
      for (const descriptor of this.#descriptors) if (descriptor >= 0) closeSync(descriptor);
      this.#descriptors = null;
    }
    for (const file of this.files) {
      try {
        unlinkSync(file);
      } catch {
        // not created
      }
    }
    try {
      rmdirSync(this.directory);
    } catch {
      // not empty or not created: leave it
    }
  }

  #descriptor(slot: 0 | 1): number {
    if (this.#descriptors === null) throw new Error('DiskSlotStore: the slots are not allocated');
    return this.#descriptors[slot];
  }

  #corrupt(slot: 0 | 1, chunk: number, what: string): FsdpError {
    const file = this.files[slot];
    const start = this.offsets[chunk]! * 4;
    const end = this.offsets[chunk + 1]! * 4;
    return new FsdpError(
      `${contentsLabel[this.contents]}: ${file} chunk ${chunk} (bytes ${start}-${end}) ${what}. The file changed after it was written (or the disk returned other bytes); the step was not taken, the model and its optimizer state are unchanged.`,
      {
        code: 'offload-failed',
        file,
        expected: 'the bytes written, by their CRC-32',
        actual: { chunk, bytes: [start, end] },
        fix: 'check the disk (dmesg, smartctl) and that nothing else writes under offload.directory; then resume from the last checkpoint (loadCheckpoint).',
      },
    );
  }

  #ioError(operation: 'read' | 'write', slot: 0 | 1, chunk: number, error: unknown): FsdpError {
    const file = this.files[slot];
    const code = (error as { code?: unknown } | undefined)?.code;
    const where = chunk < 0 ? '' : ` chunk ${chunk}`;
    const message = error instanceof Error ? error.message : String(error);
    if (code === 'ENOSPC' || code === 'EDQUOT') {
      const needed = this.offsets[this.offsets.length - 1]! * 4 * 2;
      return new FsdpError(
        `${contentsLabel[this.contents]}: the disk of ${file} is full (${String(code)}) writing${where}: ${message}. The step was not taken; the state before it stays valid.`,
        {
          code: 'offload-failed',
          file,
          expected: `${needed} bytes free under ${this.directory} (two copies of this rank's ${this.contents === 'parameters' ? 'parameter shards' : 'optimizer state'})`,
          actual: freeBytes(this.directory),
          fix: 'free space on that disk (or point offload.directory at a larger one) and run the step again.',
          cause: error,
        },
      );
    }
    return new FsdpError(
      `${contentsLabel[this.contents]}: could not ${operation} ${file}${where}: ${message}`,
      {
        code: 'offload-failed',
        file,
        fix: 'check that offload.directory is on a local, writable disk.',
        cause: error,
      },
    );
  }
}

/** A failure the I/O thread reported, as the error it was there (its `code` kept). */
function asError(failure: ThreadFailure): Error {
  return Object.assign(new Error(failure.message), { code: failure.code });
}

function hex(value: number): string {
  return `0x${value.toString(16).padStart(8, '0')}`;
}

function freeBytes(directory: string): string {
  try {
    const stats = statfsSync(directory);
    return `${stats.bavail * stats.bsize} bytes free`;
  } catch {
    return 'free space unknown';
  }
}
