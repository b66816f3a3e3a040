/**
 * The offload slot stores alone: chunks round-trip through both slots, a changed byte is an
 * FsdpError naming the file and the chunk on the main thread's read and on the I/O thread's
 * (verification and prefetched reads), writes on the I/O thread land in order and checksummed,
 * and the JavaScript CRC-32 fallback is zlib's.
 */
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as zlib from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { FsdpError } from '../src/errors';
import { tableCrc32 } from '../src/offload/chunk-io-thread';
import { createSlotStore, emptyOffloadStatistics } from '../src/offload/offload-store';

const directory = mkdtempSync(join(tmpdir(), 'fsdp-offload-store-'));
afterAll(() => rmSync(directory, { recursive: true, force: true }));

const offsets = [0, 1000, 1500, 4000]; // three chunks of 1000, 500 and 2500 elements

function chunkValues(chunk: number, seed: number): Float32Array {
  const values = new Float32Array(offsets[chunk + 1]! - offsets[chunk]!);
  for (let index = 0; index < values.length; index++)
    values[index] = Math.sin(seed * 7919 + chunk * 104729 + index);
  return values;
}

function shared(length: number): Float32Array {
  return new Float32Array(new SharedArrayBuffer(length * 4));
}

function flipByte(file: string, position: number): void {
  const descriptor = openSync(file, 'r+');
  writeSync(descriptor, new Uint8Array([0xa5]), 0, 1, position);
  closeSync(descriptor);
}

function thrown(run: () => void): FsdpError {
  try {
    run();
  } catch (error) {
    if (error instanceof FsdpError) return error;
    throw error;
  }
  throw new Error('expected an FsdpError');
}

describe('offload slot stores', () => {
  it('the JavaScript CRC-32 equals zlib crc32', () => {
    const bytes = new Uint8Array(10_007);
    for (let index = 0; index < bytes.length; index++) bytes[index] = (index * 31 + 7) & 0xff;
    const native = (zlib as unknown as { crc32(bytes: Uint8Array): number }).crc32(bytes);
    expect(tableCrc32(bytes)).toBe(native);
    expect(tableCrc32(new Uint8Array(0))).toBe(0);
  });

  for (const kind of ['memory', 'disk'] as const) {
    it(`${kind}: chunks written to a slot read back, on the main thread and prefetched`, () => {
      const statistics = emptyOffloadStatistics();
      const store = createSlotStore(
        kind,
        offsets,
        { directory: join(directory, kind), rank: 0, syncBytes: 4096 },
        statistics,
      );
      store.allocate();
      for (let chunk = 0; chunk < 3; chunk++) store.write(1, chunk, chunkValues(chunk, 1));
      store.flush(1);
      const into = shared(2500);
      for (let chunk = 0; chunk < 3; chunk++) {
        const view = into.subarray(0, offsets[chunk + 1]! - offsets[chunk]!);
        store.read(1, chunk, view);
        expect(view).toEqual(chunkValues(chunk, 1));
        view.fill(0);
        store.startRead(1, chunk, view);
        store.finishRead(1, chunk, view);
        expect(view).toEqual(chunkValues(chunk, 1));
      }
      store.prefetchVerify(1);
      store.verify(1, into);
      store.verify(0, into); // zeros, as allocated
      expect(statistics.bytesWritten).toBeGreaterThanOrEqual(4000 * 4);
      store.release();
    });
  }

  it('disk: a changed byte fails every kind of read, naming the file and the chunk', () => {
    const store = createSlotStore(
      'disk',
      offsets,
      { directory: join(directory, 'flip'), rank: 3, syncBytes: 1 << 20 },
      emptyOffloadStatistics(),
    );
    store.allocate();
    for (let chunk = 0; chunk < 3; chunk++) store.write(0, chunk, chunkValues(chunk, 2));
    store.flush(0);
    const file = join(directory, 'flip', 'rank-3', 'optimizer-state-0.bin');
    flipByte(file, 4 * 1500 + 17); // inside chunk 2
    const into = shared(2500);
    const direct = thrown(() => store.read(0, 2, into));
    expect(direct.code).toBe('offload-failed');
    expect(direct.file).toBe(file);
    expect(direct.message).toContain(`${file} chunk 2 (bytes 6000-16000)`);
    store.prefetchVerify(0);
    const verified = thrown(() => store.verify(0, into));
    expect(verified.message).toContain(`${file} chunk 2`);
    store.startRead(0, 2, into);
    const prefetched = thrown(() => store.finishRead(0, 2, into));
    expect(prefetched.message).toContain(`${file} chunk 2`);
    // The other chunks still read.
    store.read(0, 1, into.subarray(0, 500));
    expect(into.subarray(0, 500)).toEqual(chunkValues(1, 2));
    store.release();
  });
  it('disk: writes on the I/O thread land before a later read reuses their buffer, checksummed', () => {
    const statistics = emptyOffloadStatistics();
    const store = createSlotStore(
      'disk',
      offsets,
      { directory: join(directory, 'thread-writes'), rank: 1, syncBytes: 4096 },
      statistics,
    );
    store.allocate();
    for (let chunk = 0; chunk < 3; chunk++) store.write(0, chunk, chunkValues(chunk, 3));
    store.flush(0);
    // The step's pattern with one buffer: write chunk c from it, then read chunk c + 1 into it.
    const buffer = shared(2500);
    const view = (chunk: number) => buffer.subarray(0, offsets[chunk + 1]! - offsets[chunk]!);
    view(0).set(chunkValues(0, 4));
    store.startWrite(1, 0, view(0));
    store.startRead(0, 1, view(1));
    store.finishRead(0, 1, view(1));
    expect(view(1)).toEqual(chunkValues(1, 3));
    view(1).set(chunkValues(1, 4));
    store.startWrite(1, 1, view(1));
    store.startRead(0, 2, view(2));
    store.finishRead(0, 2, view(2));
    view(2).set(chunkValues(2, 4));
    store.startWrite(1, 2, view(2));
    store.finishWrites();
    store.flush(1);
    expect(statistics.bytesWritten).toBeGreaterThanOrEqual(2 * 4000 * 4);
    expect(statistics.writerMs).toBeGreaterThan(0);
    const into = shared(2500);
    for (let chunk = 0; chunk < 3; chunk++) {
      const target = into.subarray(0, offsets[chunk + 1]! - offsets[chunk]!);
      store.read(1, chunk, target);
      expect(target).toEqual(chunkValues(chunk, 4));
    }
    // The CRC-32 the thread recorded is checked: a changed byte of a thread-written chunk fails.
    const file = join(directory, 'thread-writes', 'rank-1', 'optimizer-state-1.bin');
    flipByte(file, 4 * 1000 + 3); // inside chunk 1
    expect(thrown(() => store.read(1, 1, into.subarray(0, 500))).message).toContain(`${file} chunk 1`);
    store.release();
  });
});
