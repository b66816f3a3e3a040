import { TensorView } from '@fsdp-ts/tensor';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { flatStorageOf, gradPiece, makeCuts, shardedParameters } from './support/sharding';
import { fixtureParameters, fixtures, makeOptimizer, type OptimizerCase } from './support/torch-fixtures';

const template = fixtures.parameters;
const numels = template.map(({ values }) => values.length);
const elementwise = fixtures.cases.filter(({ optimizer }) => optimizer !== 'LAMB' && optimizer !== 'LARS');

/** The whole, unsharded run: the reference. */
function unshardedRun(testCase: OptimizerCase, steps: number): number[] {
  const params = fixtureParameters();
  const optimizer = makeOptimizer(testCase, params);
  for (let step = 0; step < steps; step++) {
    params.forEach((param, index) => {
      param.grad = TensorView.fromArray(fixtures.grads[step]![index]!, param.shape);
    });
    optimizer.step();
  }
  return params.flatMap((param) => param.data.toArray());
}

describe('sharded equivalence of the elementwise optimizers (in process)', () => {
  for (const testCase of elementwise) {
    it(`${testCase.optimizer}: ${testCase.name}: W = 1..4 pieces per parameter, some empty, equal the whole exactly`, () => {
      const expected = unshardedRun(testCase, fixtures.steps);
      let emptyPieces = 0;
      for (let worldSize = 1; worldSize <= 4; worldSize++) {
        for (const seed of [1, 2, 3]) {
          const cuts = makeCuts(numels, worldSize, seed * 97 + worldSize);
          emptyPieces += cuts.flatMap((list) =>
            list.slice(1).filter((end, rank) => end === list[rank]),
          ).length;
          const flat = flatStorageOf(
            template.map(({ values }) => values),
            false,
          );
          const ranks = Array.from({ length: worldSize }, (_, rank) => {
            const params = shardedParameters(template, flat, cuts, rank);
            return { rank, params, optimizer: makeOptimizer(testCase, params) };
          });
          for (let step = 0; step < fixtures.steps; step++) {
            for (const { rank, params, optimizer } of ranks) {
              params.forEach((param, index) => {
                param.grad = gradPiece(fixtures.grads[step]![index]!, cuts, index, rank);
              });
              optimizer.step();
            }
          }
          expect(
            Array.from(flat.array()),
            `W=${worldSize} seed=${seed} cuts=${JSON.stringify(cuts)}`,
          ).toEqual(expected.map(Math.fround));
        }
      }
      expect(emptyPieces).toBeGreaterThan(0);
    });
  }

  it('property: any cut points (fast-check), any elementwise case, 6 steps: pieces equal the whole exactly', () => {
    const cutsArbitrary = (worldSize: number) =>
      fc.tuple(
        ...numels.map((numel) =>
          fc
            .array(fc.integer({ min: 0, max: numel }), { minLength: worldSize - 1, maxLength: worldSize - 1 })
            .map((inner) => [0, ...inner.sort((first, second) => first - second), numel]),
        ),
      );
    const scenario = fc
      .tuple(fc.integer({ min: 0, max: elementwise.length - 1 }), fc.integer({ min: 1, max: 4 }))
      .chain(([caseIndex, worldSize]) =>
        fc.tuple(fc.constant(caseIndex), fc.constant(worldSize), cutsArbitrary(worldSize)),
      );
    fc.assert(
      fc.property(scenario, ([caseIndex, worldSize, cuts]) => {
        const testCase = elementwise[caseIndex]!;
        const steps = 6;
        const flat = flatStorageOf(
          template.map(({ values }) => values),
          false,
        );
        const ranks = Array.from({ length: worldSize }, (_, rank) => {
          const params = shardedParameters(template, flat, cuts, rank);
          return { rank, params, optimizer: makeOptimizer(testCase, params) };
        });
        for (let step = 0; step < steps; step++) {
          for (const { rank, params, optimizer } of ranks) {
            params.forEach((param, index) => {
              param.grad = gradPiece(fixtures.grads[step]![index]!, cuts, index, rank);
            });
            optimizer.step();
          }
        }
        expect(Array.from(flat.array())).toEqual(unshardedRun(testCase, steps).map(Math.fround));
      }),
      { numRuns: 60 },
    );
  });
});
