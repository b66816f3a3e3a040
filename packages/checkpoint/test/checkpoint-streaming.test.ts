import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CheckpointError, type StreamedValues } from '@fsdp-ts/checkpoint';
import { afterAll, describe, expect, it } from 'vitest';
import type { DataFileEntry } from '../src/format/checkpoint-format';
import { executeReads, type PlannedRead, retargetToPieces } from '../src/reader/verified-range-reader';
import { RankFileWriter } from '../src/writer/rank-file-writer';

const work = mkdtempSync(join(tmpdir(), 'fsdp-streaming-test-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** Deterministic float32 values (bit patterns of every kind, NaN payloads aside). */
function values(count: number, seed: number): Float32Array {
  const out = new Float32Array(count);
  let state = seed;
  for (let index = 0; index < count; index++) {
    state = (Math.imul(state, 1664525) + 1013904223) | 0;
    out[index] = (state / 2 ** 31) * 1000;
  }
  return out;
}

const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

// Limits far below the data, so every path crosses chunk, sync, block, run and read boundaries.
const blockBytes = 4096;
const writeLimits = { chunkBytes: 3000 * 4, syncBytes: 5000 * 4 };
const readLimits = { runBytes: 3 * blockBytes, readBytes: 1000 * 4 };

function writeFile(name: string) {
  const parameters = values(10_007, 1);
  const expAvg = [
    { offset: 3, values: values(4000, 2) },
    { offset: 6000, values: values(4007, 3) },
  ];
  const writer = new RankFileWriter(join(work, name), blockBytes, writeLimits);
  writer.append('root', 0, 'parameters', parameters);
  writer.appendPieces('root', 0, 'expAvg', parameters.length, expAvg);
  const finished = writer.finish();
  const file: DataFileEntry = {
    rank: 0,
    file: name,
    index: `${name}.json`,
    bytes: finished.bytes,
    sha256: finished.sha256,
    indexSha256: '',
    blockBytes,
    blockDigests: writer.blockDigests,
    segments: writer.segments,
  };
  return { parameters, expAvg, file };
}

describe('streaming checkpoint writes and reads (bounded chunks, digests on the way)', () => {
  it('writes segments and zero-filled pieces in chunks with the digests of every block', () => {
    const { parameters, expAvg, file } = writeFile('written.bin');
    const bytes = readFileSync(join(work, 'written.bin'));
    // The file is exactly the parameters, then the pieces at their offsets with zeros between.
    const expected = new Float32Array(2 * parameters.length);
    expected.set(parameters);
    for (const piece of expAvg) expected.set(piece.values, parameters.length + piece.offset);
    expect(bytes.byteLength).toBe(expected.byteLength);
    expect(Buffer.compare(bytes, Buffer.from(expected.buffer))).toBe(0);
    expect(file.blockDigests).toHaveLength(Math.ceil(bytes.byteLength / blockBytes));
    file.blockDigests.forEach((digest, block) => {
      expect(digest).toBe(sha256(bytes.subarray(block * blockBytes, (block + 1) * blockBytes)));
    });
    // The file digest is derived from the block digests, each byte hashed once (format version 3):
    // recomputed here from the bytes, as `split -b N --filter='sha256sum | cut -c1-64' | sha256sum`.
    let listing = '';
    for (let start = 0; start < bytes.byteLength; start += blockBytes) {
      listing += `${sha256(bytes.subarray(start, start + blockBytes))}\n`;
    }
    expect(file.sha256).toBe(sha256(Buffer.from(listing, 'latin1')));
    expect(file.sha256).not.toBe(sha256(bytes));
  });

  it('verifies without writing a target, then reads straight into per-parameter arrays bit for bit', () => {
    const { parameters, expAvg, file } = writeFile('read.bin');
    const segment = file.segments[1]!;
    const shardTarget = new Float32Array(parameters.length);
    const reads: PlannedRead[] = [
      // The parameters segment into one flat array, in several runs and split reads.
      {
        file,
        byteOffset: 0,
        byteLength: parameters.byteLength,
        target: shardTarget,
        targetOffset: 0,
        parameter: 'all',
      },
    ];
    // The state planned against the flat layout, then pointed at one array per parameter.
    const pieces = expAvg.map((piece) => ({
      offset: piece.offset,
      values: new Float32Array(piece.values.length),
    }));
    const flat = expAvg.map((piece, index) => ({
      file,
      byteOffset: segment.byteOffset + piece.offset * 4,
      byteLength: piece.values.byteLength,
      target: new Float32Array(0),
      targetOffset: piece.offset,
      parameter: `p${index}`,
    }));
    reads.push(...retargetToPieces(flat, pieces, 'expAvg'));
    const read = executeReads(work, reads, 'verify', readLimits);
    expect(read).toBeGreaterThan(0);
    expect(shardTarget.every((value) => value === 0)).toBe(true);
    expect(pieces.every((piece) => piece.values.every((value) => value === 0))).toBe(true);
    executeReads(work, reads, 'copy', readLimits);
    expect(Buffer.compare(Buffer.from(shardTarget.buffer), Buffer.from(parameters.buffer))).toBe(0);
    pieces.forEach((piece, index) => {
      expect(
        Buffer.compare(Buffer.from(piece.values.buffer), Buffer.from(expAvg[index]!.values.buffer)),
      ).toBe(0);
    });
    // A read no array holds is a bug of the caller, said as such.
    expect(() => retargetToPieces([{ ...flat[0]!, targetOffset: 5000 }], pieces, 'expAvg')).toThrow(
      /no 'expAvg' array holds elements 5000/,
    );
  });

  it('a changed byte fails verification naming the parameter, and nothing is written', () => {
    const { parameters, file } = writeFile('damaged.bin');
    const path = join(work, 'damaged.bin');
    const bytes = readFileSync(path);
    bytes[5 * blockBytes + 17]! ^= 0x01;
    writeFileSync(path, bytes);
    const target = new Float32Array(parameters.length);
    const reads: PlannedRead[] = [
      {
        file,
        byteOffset: 0,
        byteLength: parameters.byteLength,
        target,
        targetOffset: 0,
        parameter: 'weight',
      },
    ];
    for (const mode of ['verify', 'copy'] as const) {
      let caught: unknown;
      try {
        executeReads(work, reads, mode, readLimits);
      } catch (error) {
        caught = error;
      }
      expect(caught).toBeInstanceOf(CheckpointError);
      expect((caught as CheckpointError).reason).toBe('corrupt');
      expect((caught as CheckpointError).parameters).toEqual(['weight']);
    }
    // Nothing from the damaged block on was copied out (earlier runs were, in 'copy' mode).
    expect(target.subarray((5 * blockBytes) / 4).every((value) => value === 0)).toBe(true);
  });
  it('writes streamed values as the same bytes as the arrays, holding one run at a time', () => {
    const { expAvg } = writeFile('arrays.bin');
    const parameters = values(10_007, 1);
    // Each piece produced in runs of 777 elements through one reused buffer.
    const run = new Float32Array(777);
    const streamed = (source: Float32Array): StreamedValues => ({
      length: source.length,
      stream(sink) {
        for (let start = 0; start < source.length; start += run.length) {
          const length = Math.min(run.length, source.length - start);
          run.set(source.subarray(start, start + length));
          sink(run.subarray(0, length));
        }
      },
    });
    const writer = new RankFileWriter(join(work, 'streamed.bin'), blockBytes, writeLimits);
    writer.append('root', 0, 'parameters', parameters);
    writer.appendPieces(
      'root',
      0,
      'expAvg',
      parameters.length,
      expAvg.map((piece) => ({ offset: piece.offset, values: streamed(piece.values) })),
    );
    writer.finish();
    expect(sha256(readFileSync(join(work, 'streamed.bin')))).toBe(
      sha256(readFileSync(join(work, 'arrays.bin'))),
    );
    expect(writer.streamedBytes).toBe((4000 + 4007) * 4);
    expect(writer.streamedRunBytesHighWater).toBe(777 * 4);
    // A producer that hands over fewer (or more) elements than it declared fails the write.
    const short = new RankFileWriter(join(work, 'short.bin'), blockBytes, writeLimits);
    const tooFew: StreamedValues = { length: 10, stream: (sink) => sink(new Float32Array(9)) };
    expect(() => short.appendPieces('root', 0, 'expAvg', 20, [{ offset: 0, values: tooFew }])).toThrow(
      /produced 9 of the 10 elements/,
    );
    short.abandon();
    const long = new RankFileWriter(join(work, 'long.bin'), blockBytes, writeLimits);
    const tooMany: StreamedValues = { length: 10, stream: (sink) => sink(new Float32Array(11)) };
    expect(() => long.appendPieces('root', 0, 'expAvg', 20, [{ offset: 0, values: tooMany }])).toThrow(
      CheckpointError,
    );
    long.abandon();
  });
});
