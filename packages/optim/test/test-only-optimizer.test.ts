import { TensorView } from '@fsdp-ts/tensor';
import { describe, expect, it } from 'vitest';
import { OptimError } from '../src/index';
import { flatStorageOf, gradPiece, makeCuts, shardedParameters } from './support/sharding';
import { Signum } from './support/signum';
import { fixtureParameters, fixtures } from './support/torch-fixtures';

// CONTRIBUTING's "add an optimizer" recipe, followed for the test-only Signum (support/signum.ts):
// an independent reference, sharded equivalence (W = 1..4 pieces, some empty), a state-dict round trip.

const options = { lr: 0.01, momentum: 0.5 };
const numels = fixtures.parameters.map(({ values }) => values.length);

function setGrads(params: ReturnType<typeof fixtureParameters>, step: number): void {
  params.forEach((param, index) => {
    param.grad = TensorView.fromArray(fixtures.grads[step]![index]!, param.shape);
  });
}

describe('Signum, a test-only optimizer added through the recipe', () => {
  it('matches a float64 reference of m = b m + (1 - b) g, p -= lr sign(m) (within float32 rounding)', () => {
    const params = fixtureParameters();
    const optimizer = new Signum(params, options);
    const reference = fixtures.parameters.map(({ values }) => values.map(Math.fround));
    const momentum = reference.map((values) => values.map(() => 0));
    for (let step = 0; step < fixtures.steps; step++) {
      setGrads(params, step);
      optimizer.step();
      reference.forEach((values, index) => {
        values.forEach((_, element) => {
          const m = 0.5 * momentum[index]![element]! + 0.5 * fixtures.grads[step]![index]![element]!;
          momentum[index]![element] = m;
          values[element]! -= 0.01 * Math.sign(m);
        });
      });
    }
    params.forEach((param, index) => {
      param.data.toArray().forEach((value, element) => {
        expect(Math.abs(value - reference[index]![element]!)).toBeLessThanOrEqual(1e-6);
      });
    });
  });

  it('pieces of every parameter (W = 1..4, some empty) step exactly like the whole', () => {
    const whole = fixtureParameters();
    const optimizer = new Signum(whole, options);
    for (let step = 0; step < fixtures.steps; step++) {
      setGrads(whole, step);
      optimizer.step();
    }
    const expected = whole.flatMap((param) => param.data.toArray());
    for (let worldSize = 1; worldSize <= 4; worldSize++) {
      const cuts = makeCuts(numels, worldSize, 31 * worldSize);
      const flat = flatStorageOf(
        fixtures.parameters.map(({ values }) => values),
        false,
      );
      const ranks = Array.from({ length: worldSize }, (_, rank) => {
        const params = shardedParameters(fixtures.parameters, flat, cuts, rank);
        return { rank, params, optimizer: new Signum(params, options) };
      });
      for (let step = 0; step < fixtures.steps; step++) {
        for (const { rank, params, optimizer: piece } of ranks) {
          params.forEach((param, index) => {
            param.grad = gradPiece(fixtures.grads[step]![index]!, cuts, index, rank);
          });
          piece.step();
        }
      }
      expect(Array.from(flat.array()), `W=${worldSize}`).toEqual(expected);
    }
  });

  it('a mid-training state-dict round trip continues identically; bad hyperparameters are rejected', () => {
    const params = fixtureParameters();
    const optimizer = new Signum(params, options);
    const half = Math.floor(fixtures.steps / 2);
    for (let step = 0; step < half; step++) {
      setGrads(params, step);
      optimizer.step();
    }
    const resumedParams = fixtureParameters();
    resumedParams.forEach((param, index) => {
      param.data.typedArray().set(params[index]!.data.typedArray());
    });
    const resumed = new Signum(resumedParams, options);
    resumed.loadStateDict(optimizer.stateDict());
    for (let step = half; step < fixtures.steps; step++) {
      setGrads(params, step);
      optimizer.step();
      setGrads(resumedParams, step);
      resumed.step();
    }
    resumedParams.forEach((param, index) => {
      expect(param.data.toArray()).toEqual(params[index]!.data.toArray());
    });
    expect(() => new Signum(fixtureParameters(), { momentum: 1 })).toThrow(OptimError);
  });
});
