import { spawnThreadRanks } from '@fsdp-ts/collectives';
import { backward } from '@fsdp-ts/nn';
import { initBackend } from '@fsdp-ts/tensor';
import { describe, expect, it } from 'vitest';
import { type Gradients, meanSquaredError, samples, TwiceUsedModel } from './fixtures/shared-use-rank';

const fixture = new URL('./fixtures/shared-use-rank.ts', import.meta.url);
const batch = 3;

/** The unwrapped model on every rank's samples at once: the mean gradient data parallelism must produce. */
async function reference(worldSize: number): Promise<Gradients> {
  await initBackend('cpu');
  const model = new TwiceUsedModel();
  const { inputs, targets } = samples(0, batch * worldSize);
  backward(model, () => meanSquaredError(model.forward(inputs), targets));
  const gradients: Gradients = {};
  for (const [name, parameter] of model.namedParameters()) gradients[name] = parameter.grad!.toArray();
  return gradients;
}

// A tap hands on the sum over its tensor's uses, and a unit run twice expects each call's taps (see
// [Note: units called more than once]): the all-reduce waits for the last gradient of the step.
// A reduction issued after the first use's gradient (the unit's second run, first in backward)
// would average a partial gradient and leave the rest unaveraged: these gradients would differ
// from the reference by far more than the tolerance (the ranks' samples differ).
describe('no-shard reduces a gradient only once every use has written it', () => {
  for (const worldSize of [2, 3]) {
    it(`a unit run twice per forward and a root Linear applied twice, W=${worldSize}`, async () => {
      const expected = await reference(worldSize);
      const results = (await spawnThreadRanks(worldSize, fixture, 'sharedUseRank', {
        args: { strategy: 'no-shard', batch },
        timeoutMs: 60_000,
      })) as Gradients[];
      for (const [rank, gradients] of results.entries())
        for (const [name, values] of Object.entries(expected)) {
          const actual = gradients[name]!;
          expect(actual, `rank ${rank} ${name}`).toHaveLength(values.length);
          const scale = Math.max(...values.map(Math.abs));
          expect(scale, `${name} has a gradient`).toBeGreaterThan(1e-3);
          values.forEach((value, index) => {
            expect(Math.abs(actual[index]! - value), `rank ${rank} ${name}[${index}]`).toBeLessThanOrEqual(
              1e-5 * scale,
            );
          });
        }
    });
  }
});
