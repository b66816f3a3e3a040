import { TensorView } from '@fsdp-ts/tensor';
import { describe, expect, it } from 'vitest';
import {
  ABSOLUTE_TOLERANCE,
  fixtureParameters,
  fixtures,
  makeOptimizer,
  RELATIVE_TOLERANCE,
  worstViolation,
} from './support/torch-fixtures';

// Reference: torch.optim (SGD, Adam, AdamW) and float32 torch re-implementations of timm's Lamb and
// Lars, run by make-fixtures.py. Tolerance per element and per step:
// |ours − torch| <= 1e-6·|torch| + 1e-7.
describe(`parity with PyTorch ${fixtures.torch} over ${fixtures.steps} steps`, () => {
  it('has a case for every optimizer', () => {
    const kinds = new Set(fixtures.cases.map((testCase) => testCase.optimizer));
    expect([...kinds].sort()).toEqual(['Adam', 'AdamW', 'LAMB', 'LARS', 'SGD']);
  });

  for (const testCase of fixtures.cases) {
    it(`${testCase.optimizer}: ${testCase.name}`, () => {
      const params = fixtureParameters();
      const optimizer = makeOptimizer(testCase, params);
      let worst = 0;
      for (let step = 0; step < fixtures.steps; step++) {
        params.forEach((param, index) => {
          param.grad = TensorView.fromArray(fixtures.grads[step]![index]!, param.shape);
        });
        optimizer.step();
        params.forEach((param, index) => {
          worst = Math.max(worst, worstViolation(param.data.toArray(), testCase.trajectory[step]![index]!));
        });
      }
      // worst is the largest |error| / (RELATIVE·|expected| + ABSOLUTE) over all elements and steps.
      expect(worst, `rtol ${RELATIVE_TOLERANCE}, atol ${ABSOLUTE_TOLERANCE}`).toBeLessThanOrEqual(1);
    });
  }
});
