import { spawnThreadRanks } from '@fsdp-ts/collectives';
import { describe, expect, it } from 'vitest';
import type { Bfloat16ReduceResult, Gradients } from './fixtures/no-shard-bfloat16-rank';

const fixture = new URL('./fixtures/no-shard-bfloat16-rank.ts', import.meta.url);

function expectSameBits(wrapped: Gradients, reference: Gradients, what: string): void {
  expect(Object.keys(wrapped).sort(), what).toEqual(Object.keys(reference).sort());
  for (const [name, values] of Object.entries(reference)) {
    const got = wrapped[name]!;
    expect(got.length, `${what} ${name}`).toBe(values.length);
    const first = values.findIndex((value, index) => !Object.is(value, got[index]));
    expect(first, `${what} ${name}[${first}]: ${got[first]} against ${values[first]}`).toBe(-1);
    // The reference moved something: not every element is zero.
    expect(
      values.some((value) => value !== 0),
      `${what} ${name} is not all zero`,
    ).toBe(true);
  }
}

// No-shard with a bfloat16 reduce rounds each unit's flat gradient into its own bytes and
// all-reduces those words ([Note: bfloat16 in the float32's own bytes]); every all-reduce is then
// awaited after backward, as with float32. The grads must be, bit for bit, what the same
// reduction gives on separate copies.
describe('no-shard, reduce bfloat16: gradients reduced in their own bytes equal the reduction on copies', () => {
  it('W=2, one backward and one that adds to kept grads', async () => {
    const results = (await spawnThreadRanks(2, fixture, 'noShardBfloat16Rank', {
      args: { batch: 2 },
      timeoutMs: 60_000,
    })) as Bfloat16ReduceResult[];
    for (const [rank, { first, accumulated }] of results.entries()) {
      expectSameBits(first.wrapped, first.reference, `rank ${rank}, one backward`);
      expectSameBits(accumulated.wrapped, accumulated.reference, `rank ${rank}, kept grads`);
    }
    // Both ranks hold the one average.
    expect(results[1]!.first.wrapped).toEqual(results[0]!.first.wrapped);
  });
});
