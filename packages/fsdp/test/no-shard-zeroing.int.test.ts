import { spawnThreadRanks } from '@fsdp-ts/collectives';
import { backward, type Module } from '@fsdp-ts/nn';
import { SGD } from '@fsdp-ts/optim';
import { initBackend } from '@fsdp-ts/tensor';
import { describe, expect, it } from 'vitest';
import { type Gradients, PartlyUsedModel, type ZeroingResult } from './fixtures/no-shard-zeroing-rank';
import { meanSquaredError, samples } from './fixtures/shared-use-rank';

const fixture = new URL('./fixtures/no-shard-zeroing-rank.ts', import.meta.url);
const batch = 2;
const worldSize = 2;

/**
 * The unwrapped model: step 1 on every rank's samples, then the gradient of step 2 (side unused)
 * on samples [first, first + count); side's grads stay null there, so they are left out.
 */
async function reference(first: number, count: number): Promise<Record<string, number[]>> {
  await initBackend('cpu');
  const model = new PartlyUsedModel();
  const optimizer = new SGD(model.parameters(), { lr: 0.1 });
  const all = samples(0, batch * worldSize);
  backward(model, () => meanSquaredError(model.forward(all.inputs), all.targets));
  optimizer.step();
  optimizer.zeroGrad();
  model.useSide = false;
  const { inputs, targets } = samples(first, count);
  backward(model, () => meanSquaredError(model.forward(inputs), targets));
  return gradientsOf(model);
}

function gradientsOf(model: Module): Record<string, number[]> {
  const result: Record<string, number[]> = {};
  for (const [name, parameter] of model.namedParameters())
    if (parameter.grad !== null) result[name] = parameter.grad.toArray();
  return result;
}

function expectClose(actual: Gradients, expected: Record<string, number[]>, what: string): void {
  for (const [name, values] of Object.entries(expected)) {
    const got = actual[name];
    expect(got, `${what}: ${name} has a gradient`).not.toBeNull();
    const scale = Math.max(...values.map(Math.abs));
    expect(scale, `${what}: ${name}'s reference gradient is not zero`).toBeGreaterThan(1e-4);
    values.forEach((value, index) => {
      expect(Math.abs(got![index]! - value), `${what} ${name}[${index}]`).toBeLessThanOrEqual(1e-5 * scale);
    });
  }
}

// The flat gradient buffer of a no-shard unit outlives the step and is not filled with zeros when
// the grads were dropped: only what no gradient was copied into is zeroed, before it is read. A
// Parameter the step's loss does not use (side, in the root unit next to head) must read zero,
// not the previous step's averaged gradient that its range of the buffer still held.
describe('no-shard: a Parameter the step does not use reads a zero gradient after zeroGrad()', () => {
  it('W=2, after a synchronised and a noSync backward', async () => {
    const results = (await spawnThreadRanks(worldSize, fixture, 'noShardZeroingRank', {
      args: { batch },
      timeoutMs: 60_000,
    })) as ZeroingResult[];
    const averaged = await reference(0, batch * worldSize);
    for (const [rank, { synchronised, unsynchronised, accumulated }] of results.entries()) {
      for (const gradients of [synchronised, unsynchronised, accumulated])
        for (const name of ['side.weight', 'side.bias']) {
          expect(gradients[name], `rank ${rank} ${name}`).not.toBeNull();
          expect(
            gradients[name]!.every((value) => value === 0),
            `rank ${rank} ${name} is zero`,
          ).toBe(true);
        }
      // The used Parameters: the average over the ranks' samples, and under noSync this rank's own.
      expect(Object.keys(averaged).sort()).toEqual([
        'block.bias',
        'block.weight',
        'head.bias',
        'head.weight',
      ]);
      expectClose(synchronised, averaged, `rank ${rank} synchronised`);
      expectClose(unsynchronised, await reference(rank * batch, batch), `rank ${rank} noSync`);
    }
  });
});

// Under full-shard the unsharded gradient buffer is allocated for each backward, unzeroed, from
// the storage pool that the previous backward's buffer (holding its gradients, side's included)
// went back to: the ranges no gradient is copied into must be zeroed before the reduce-scatter
// reads them, and at the end of a noSync backward, whose buffer the next backward adds into.
describe('full-shard: a Parameter the step does not use reads a zero gradient', () => {
  it('W=2, after a synchronised backward, and after a noSync then a synchronised one', async () => {
    const results = (await spawnThreadRanks(worldSize, fixture, 'noShardZeroingRank', {
      args: { batch, strategy: 'full-shard' },
      timeoutMs: 60_000,
    })) as ZeroingResult[];
    let sideValues = 0;
    for (const [rank, { synchronised, accumulated }] of results.entries())
      for (const [what, gradients] of Object.entries({ synchronised, accumulated }))
        for (const name of ['side.weight', 'side.bias']) {
          const values = gradients[name];
          expect(values, `rank ${rank} ${what} ${name} has a gradient (its shard's piece)`).not.toBeNull();
          sideValues += values!.length;
          expect(
            values!.every((value) => value === 0),
            `rank ${rank} ${what} ${name} is zero: ${values!.slice(0, 4).join(', ')}`,
          ).toBe(true);
        }
    // side's elements sit in some rank's shard (the checks above saw values), and the used
    // Parameters did get gradients (so the buffer was written around side's range).
    expect(sideValues).toBeGreaterThan(0);
    for (const what of ['synchronised', 'accumulated'] as const) {
      const used = results.flatMap((result) => result[what]['head.weight'] ?? []);
      expect(
        used.some((value) => value !== 0),
        what,
      ).toBe(true);
    }
  });
});
