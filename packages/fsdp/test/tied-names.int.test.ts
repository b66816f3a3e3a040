import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnThreadRanks } from '@fsdp-ts/collectives';
import { afterAll, describe, expect, it } from 'vitest';
import type { TiedNamesReport } from './fixtures/tied-names-rank';

const fixture = new URL('./fixtures/tied-names-rank.ts', import.meta.url);
const work = mkdtempSync(join(tmpdir(), 'fsdp-tied-names-'));
const torchFile = new URL('./fixtures/gpt-tied.safetensors', import.meta.url).pathname;
const reference = JSON.parse(readFileSync(new URL('./fixtures/gpt-tied.json', import.meta.url), 'utf8')) as {
  stateDictNames: string[];
};

afterAll(() => {
  rmSync(work, { recursive: true, force: true });
});

/** The tensor names of a safetensors file (its JSON header). */
function namesIn(path: string): string[] {
  const bytes = readFileSync(path);
  const length = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + length).toString('utf8')) as Record<string, unknown>;
  return Object.keys(header)
    .filter((name) => name !== '__metadata__')
    .sort();
}

describe('tied parameters under FSDP (GPT with tied embeddings, W=2)', () => {
  it('the PyTorch file keeps only lmHead.weight (save_model drops the other name)', () => {
    const names = namesIn(torchFile);
    expect(names).toContain('lmHead.weight');
    expect(names).not.toContain('tokenEmbedding.weight');
  });

  for (const strategy of ['full-shard', 'no-shard'] as const) {
    it(`${strategy}: imports PyTorch's file, exports and loads both names, stateDict() is the full dict`, async () => {
      const reports = (await spawnThreadRanks(2, fixture, 'tiedNamesRank', {
        args: { work, strategy },
        timeoutMs: 90_000,
      })) as TiedNamesReport[];
      for (const report of reports) {
        expect(report.importError).toBeNull();
        // PyTorch float32 logits against ours, float32 on the cpu backend.
        expect(report.logitsMaxError).toBeLessThan(1e-5);
        expect(report.reimportError).toBeNull();
        expect(report.loadFullBothNamesError).toBeNull();
        expect(report.loadFullOnlyAliasLoads).toBe(true);
        // Like Module.stateDict(): a tied parameter once, under its first name.
        expect(report.fullStateDictNames).toContain('tokenEmbedding.weight');
        expect(report.fullStateDictNames).not.toContain('lmHead.weight');
        expect(report.stateDictEqualsFull).toBe(true);
        expect(report.stateDictShapes['tokenEmbedding.weight']).toEqual([13, 16]);
        expect(report.stateDictShapes['blocks.0.attention.inputProjection.weight']).toEqual([48, 16]);
        expect(report.checkpointRoundTrip).toBe(true);
      }
      // Every name PyTorch's state_dict() lists is in our export (strict load_state_dict accepts it).
      expect(namesIn(join(work, `exported-${strategy}.safetensors`))).toEqual(
        [...reference.stateDictNames].sort(),
      );
    }, 120_000);
  }
});
