import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnThreadRanks } from '@fsdp-ts/collectives';
import { GPT } from '@fsdp-ts/nn';
import { afterAll, describe, expect, it } from 'vitest';
import { checkpointConfig } from './fixtures/checkpoint-training';
import type { TrainingResult } from './fixtures/training-run';

const fixture = new URL('./fixtures/checkpoint-training.ts', import.meta.url);
const work = mkdtempSync(join(tmpdir(), 'fsdp-safetensors-test-'));

afterAll(() => {
  rmSync(work, { recursive: true, force: true });
});

type Pieces = TrainingResult['pieces'];

function assemble(pieces: Pieces[]): Record<string, number[]> {
  const full: Record<string, number[]> = {};
  for (const rankPieces of pieces) {
    for (const [name, { offset, values }] of Object.entries(rankPieces)) {
      full[name] ??= [];
      const target = full[name];
      values.forEach((value, index) => {
        target[offset + index] = value;
      });
    }
  }
  return full;
}

interface ReadTensor {
  dtype: string;
  shape: number[];
  begin: number;
  end: number;
  values: number[];
}

/**
 * An independent reader written from the format's description: an unsigned 64-bit little-endian
 * header length N, N bytes of JSON { name: { dtype, shape, data_offsets: [begin, end] }, optional
 * "__metadata__" }, then the data section; offsets are relative to its start.
 */
function readSafetensors(bytes: Buffer): {
  headerLength: number;
  tensors: Map<string, ReadTensor>;
  metadata: unknown;
} {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const headerLength = Number(view.getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + headerLength))) as Record<
    string,
    { dtype: string; shape: number[]; data_offsets: [number, number] }
  >;
  const dataStart = 8 + headerLength;
  const tensors = new Map<string, ReadTensor>();
  for (const [name, entry] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const [begin, end] = entry.data_offsets;
    const values: number[] = [];
    for (let position = dataStart + begin; position < dataStart + end; position += 4) {
      values.push(view.getFloat32(position, true));
    }
    tensors.set(name, { dtype: entry.dtype, shape: entry.shape, begin, end, values });
  }
  return { headerLength, tensors, metadata: header.__metadata__ };
}

describe('exportSafetensors / importSafetensors', () => {
  it('writes a valid safetensors file of the full weights and imports it at W=2 and W=3', async () => {
    const path = join(work, 'model.safetensors');
    const results = (await spawnThreadRanks(2, fixture, 'safetensorsRank', {
      args: { path, steps: 2 },
      timeoutMs: 120_000,
    })) as { exported: Pieces; freshBefore: Pieces; imported: Pieces; bytes: number }[];
    const exported = assemble(results.map((result) => result.exported));

    const bytes = readFileSync(path);
    expect(bytes.length).toBe(results[0]!.bytes);
    const { headerLength, tensors, metadata } = readSafetensors(bytes);
    expect((8 + headerLength) % 8).toBe(0);
    expect(metadata).toEqual({ format: 'pt' });
    // Every parameter of the unwrapped model, under each of its original names (a tied one
    // twice, as PyTorch's state_dict() lists it) and shape, float32.
    const unwrapped = new GPT(checkpointConfig);
    const reference = unwrapped.namedParameterPaths();
    const firstName = new Map(unwrapped.namedParameters().map(([name, parameter]) => [parameter, name]));
    expect(reference.map(([name]) => name)).toContain('lmHead.weight');
    expect([...tensors.keys()].sort()).toEqual(reference.map(([name]) => name).sort());
    const entries = [...tensors.values()].sort((left, right) => left.begin - right.begin);
    let cursor = 0;
    for (const entry of entries) {
      expect(entry.begin).toBe(cursor); // contiguous, no overlap, starting at 0
      cursor = entry.end;
    }
    expect(8 + headerLength + cursor).toBe(bytes.length);
    for (const [name, parameter] of reference) {
      const tensor = tensors.get(name)!;
      expect(tensor.dtype).toBe('F32');
      expect(tensor.shape).toEqual([...parameter.shape]);
      expect(tensor.values).toEqual(exported[firstName.get(parameter)!]);
    }

    // Round trip: a differently initialised model at W=2 gets exactly the exported values.
    for (const result of results) {
      expect(result.freshBefore).not.toEqual(result.exported);
      expect(result.imported).toEqual(result.exported);
    }
    // And at W=3 (other shard boundaries).
    const three = (await spawnThreadRanks(3, fixture, 'importRank', {
      args: { path },
      timeoutMs: 120_000,
    })) as Pieces[];
    expect(assemble(three)).toEqual(exported);
  }, 150_000);
});
