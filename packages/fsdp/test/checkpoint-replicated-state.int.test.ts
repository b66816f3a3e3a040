import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnThreadRanks } from '@fsdp-ts/collectives';
import { computeFlatParamLayout } from '@fsdp-ts/flat-param';
import { afterAll, describe, expect, it } from 'vitest';
import {
  type ReplicatedResult,
  referenceValue,
  SPECS,
  savedBuffers,
  savedDocuments,
} from './fixtures/replicated-state-rank';

const fixture = new URL('./fixtures/replicated-state-rank.ts', import.meta.url);
const work = mkdtempSync(join(tmpdir(), 'fsdp-replicated-state-'));
// Written by writeCheckpoint of format version 2 (commit d0fa9fe), before the section existed.
const formatTwo = join(work, 'format-2');
cpSync(new URL('./fixtures/format-2-checkpoint', import.meta.url), formatTwo, { recursive: true });

afterAll(() => {
  rmSync(work, { recursive: true, force: true });
});

// [Note: replicated state]
describe('checkpoint buffers and documents (format version 3, 2 thread ranks)', () => {
  it('round-trip once-saved buffers and documents, carry FSDP module buffers, verify them, and still load format 2', async () => {
    const results = (await spawnThreadRanks(2, fixture, 'replicatedRank', {
      args: { work, formatTwo },
      timeoutMs: 120_000,
    })) as ReplicatedResult[];
    // Saved once: one replicated-state.bin next to the two shard files, described in metadata.json.
    const step = join(work, 'neutral', 'step-00000001');
    expect(readdirSync(step).sort()).toEqual([
      'metadata.json',
      'replicated-state.bin',
      'shard-00000-of-00002.bin',
      'shard-00000-of-00002.json',
      'shard-00001-of-00002.bin',
      'shard-00001-of-00002.json',
    ]);
    const metadata = JSON.parse(readFileSync(join(step, 'metadata.json'), 'utf8'));
    expect(metadata.formatVersion).toBe(3);
    expect(metadata.replicated.buffers.map((entry: { name: string }) => entry.name).sort()).toEqual(
      Object.keys(savedBuffers(0)).sort(),
    );
    // Every rank got rank 0's buffers (rank 1 passed other values) and every document, exactly.
    const expectedBuffers = Object.fromEntries(
      Object.entries(savedBuffers(0)).map(([name, buffer]) => [
        name,
        { dtype: buffer.dtype, shape: [...buffer.shape], values: Array.from(buffer.values) },
      ]),
    );
    for (const result of results) {
      expect(result.buffers).toEqual(expectedBuffers);
      expect(result.documents).toEqual({
        'model.json': savedDocuments['model.json'],
        progress: savedDocuments.progress,
        'weights.bin': { bytes: [0, 1, 2, 255] },
      });
      // FSDP's saveCheckpoint/loadCheckpoint carry the module's buffer.
      expect(result.restoredBuffer).toEqual([0.5, 1.5, 2.5, 3.5]);
      // A flipped bit in replicated-state.bin fails every rank, naming the file.
      expect(result.damaged.reason).toMatch(/^(corrupt|peer-failed)$/);
      expect(result.damaged.message).toContain('replicated-state.bin');
      // A buffer of another shape fails every rank as a model mismatch, naming the buffer.
      expect(result.missingBuffer.reason).toMatch(/^(model-mismatch|peer-failed)$/);
      expect(result.missingBuffer.message).toContain('running');
      expect(result.unchangedAfterFailures).toBe(true);
      // Format 2: parameters load, the section is empty, the model's buffer is left as it was.
      expect(result.formatTwo.buffers).toBe(0);
      expect(result.formatTwo.documents).toBe(0);
      expect(result.formatTwo.extra).toEqual({ epoch: 1 });
      expect(result.formatTwoBufferKept).toBe(true);
    }
    expect(results.some((result) => result.damaged.reason === 'corrupt')).toBe(true);
    // Only rank 1's extra held a BigInt: rank 1 fails with 'invalid-input', rank 0 with
    // 'peer-failed' naming it (neither waits for the other), and no step directory appears.
    const [zero, one] = results.map((result) => result.badExtra);
    expect(one!.reason).toBe('invalid-input');
    expect(one!.message).toMatch(/extra is not JSON/);
    expect(one!.fix).toMatch(/BigInts/);
    expect(zero!.reason).toBe('peer-failed');
    expect(zero!.message).toMatch(/rank 1.*extra is not JSON/);
    for (const result of results) expect(result.badExtraStepWritten).toBe(false);
    const layout = computeFlatParamLayout(SPECS, { dtype: 'float32', worldSize: 2, alignment: 4 });
    results.forEach((result, rank) => {
      const expected = new Array<number>(layout.shardNumel).fill(0);
      layout.parameters.forEach((parameter, index) => {
        for (let element = 0; element < parameter.numel; element++) {
          const flat = parameter.offset + element - rank * layout.shardNumel;
          if (flat >= 0 && flat < expected.length) expected[flat] = referenceValue(index, element);
        }
      });
      expect(result.formatTwo.values, `rank ${rank}`).toEqual(expected);
    });
  }, 150_000);
});
