import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnThreadRanks } from '@fsdp-ts/collectives';
import { computeFlatParamLayout } from '@fsdp-ts/flat-param';
import { afterAll, describe, expect, it } from 'vitest';
import { type NeutralResult, referenceValue, SPECS } from './fixtures/neutral-checkpoint-rank';

const fixture = new URL('./fixtures/neutral-checkpoint-rank.ts', import.meta.url);
const work = mkdtempSync(join(tmpdir(), 'fsdp-neutral-checkpoint-'));

afterAll(() => {
  rmSync(work, { recursive: true, force: true });
});

// [Note: sharded model state]: the checkpoint writer and reader take a description of flat
// shards, not an FSDP model, so anything holding flat-param layouts can write the same files.
describe('checkpoints from a sharded-state description without FSDP (2 thread ranks)', () => {
  it('FSDP loads what a hand-made description wrote, and the reader fills a hand-made description from what FSDP saved', async () => {
    const results = (await spawnThreadRanks(2, fixture, 'neutralRank', {
      args: { root: work },
      timeoutMs: 120_000,
    })) as NeutralResult[];
    // Every element of every parameter reached FSDP's shards (its own layout: one unit, no alignment).
    const names = ['encoder.weight', 'encoder.bias', 'head.weight'];
    names.forEach((name, parameter) => {
      const numel = SPECS[parameter]!.shape.reduce((product, value) => product * value, 1);
      const full = new Array<number>(numel).fill(Number.NaN);
      for (const result of results) {
        const { offset, values } = result.fsdpPieces[name]!;
        values.forEach((value, index) => {
          full[offset + index] = value;
        });
      }
      expect(full, name).toEqual(
        Array.from({ length: numel }, (_, element) => referenceValue(parameter, element)),
      );
    });
    // Read back into the hand-made layout (two groups, alignment 4): each rank's slices hold the
    // reference values where parameters are, zeros in the padding.
    const groups = [SPECS.slice(0, 2), SPECS.slice(2)];
    const firsts = [0, 2];
    results.forEach((result, rank) => {
      groups.forEach((specs, group) => {
        const layout = computeFlatParamLayout(specs, { dtype: 'float32', worldSize: 2, alignment: 4 });
        const expected = new Array<number>(layout.shardNumel).fill(0);
        layout.parameters.forEach((parameter, index) => {
          for (let element = 0; element < parameter.numel; element++) {
            const flat = parameter.offset + element - rank * layout.shardNumel;
            if (flat >= 0 && flat < expected.length)
              expected[flat] = referenceValue(firsts[group]! + index, element);
          }
        });
        expect(result.reread[group], `rank ${rank} group ${group}`).toEqual(expected);
      });
    });
  }, 150_000);
});
