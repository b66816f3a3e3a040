import { readFileSync } from 'node:fs';
import {
  Adam,
  AdamW,
  LAMB,
  LARS,
  type NormReductionGroup,
  type Optimizer,
  type ParamGroupInput,
  SGD,
} from '@fsdp-ts/optim';
import { Parameter } from '@fsdp-ts/tensor';

/** torch-optim.json, written by make-fixtures.py with PyTorch 1.13 (see that script). */
export interface TorchFixtures {
  torch: string;
  steps: number;
  parameters: { name: string; shape: number[]; values: number[] }[];
  /** grads[step][parameter] = flat values. */
  grads: number[][][];
  cases: OptimizerCase[];
  schedules: { name: string; kind: string; options: Record<string, number>; lrs: number[][] }[];
}

export interface OptimizerCase {
  name: string;
  optimizer: 'SGD' | 'Adam' | 'AdamW' | 'LAMB' | 'LARS';
  options: Record<string, unknown>;
  /** Groups by parameter position, with their own hyperparameters. */
  groups?: ({ params: number[] } & Record<string, unknown>)[];
  /** trajectory[step][parameter] = flat values after that step. */
  trajectory: number[][][];
}

export const fixtures: TorchFixtures = JSON.parse(
  readFileSync(new URL('../fixtures/torch-optim.json', import.meta.url), 'utf8'),
);

// biome-ignore lint/suspicious/noExplicitAny: the optimizers differ only in their option types
type AnyOptimizer = Optimizer<any>;

/** Builds the case's optimizer (with its groups, if any) over `params`. */
export function makeOptimizer(
  testCase: OptimizerCase,
  params: Parameter[],
  group?: NormReductionGroup,
): AnyOptimizer {
  const input: Parameter[] | ParamGroupInput<{ lr: number }>[] =
    testCase.groups === undefined
      ? params
      : testCase.groups.map(({ params: positions, ...hyperparameters }) => ({
          ...hyperparameters,
          params: positions.map((position) => params[position]!),
        }));
  // biome-ignore lint/suspicious/noExplicitAny: options come from JSON
  const options = testCase.options as any;
  switch (testCase.optimizer) {
    case 'SGD':
      return new SGD(input, options);
    case 'Adam':
      return new Adam(input, options);
    case 'AdamW':
      return new AdamW(input, options);
    case 'LAMB':
      return new LAMB(input, group === undefined ? options : { ...options, group });
    case 'LARS':
      return new LARS(input, group === undefined ? options : { ...options, group });
  }
}

/** Fresh full-shape parameters holding the fixture's initial values. */
export function fixtureParameters(): Parameter[] {
  return fixtures.parameters.map(({ name, shape, values }) => Parameter.fromArray(values, shape, { name }));
}

/**
 * The tolerance every parity check states: |actual − expected| <= RELATIVE·|expected| + ABSOLUTE.
 * RELATIVE is the 1e-6; ABSOLUTE (1e-7, below one float32 ulp of values near 1) only
 * matters for elements near zero, where a relative bound means nothing.
 */
export const RELATIVE_TOLERANCE = 1e-6;
export const ABSOLUTE_TOLERANCE = 1e-7;

/** The largest violation ratio (error / allowed) over two equal-length lists; <= 1 passes. */
export function worstViolation(actual: ArrayLike<number>, expected: ArrayLike<number>): number {
  let worst = 0;
  for (let index = 0; index < expected.length; index++) {
    const allowed = RELATIVE_TOLERANCE * Math.abs(expected[index]!) + ABSOLUTE_TOLERANCE;
    worst = Math.max(worst, Math.abs(actual[index]! - expected[index]!) / allowed);
  }
  return worst;
}
