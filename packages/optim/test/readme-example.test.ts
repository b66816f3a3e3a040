import { AdamW, LinearWarmupCosineLR } from '@fsdp-ts/optim';
import { Parameter, TensorView } from '@fsdp-ts/tensor';
import { expect, it } from 'vitest';

it('the README example runs as written', () => {
  // --- begin README example (keep in sync with packages/optim/README.md) ---
  const weight = Parameter.fromArray([0.5, -0.25, 1, 2], [2, 2], { name: 'encoder.weight' });
  const bias = Parameter.fromArray([0.1, 0.2], [2], { name: 'head.bias' });
  const optimizer = new AdamW([{ params: [weight] }, { params: [bias], lr: 1e-2, weightDecay: 0 }], {
    lr: 1e-3,
  });
  const schedule = new LinearWarmupCosineLR(optimizer, { warmupSteps: 10, totalSteps: 1000 });
  for (let step = 0; step < 3; step++) {
    weight.grad = TensorView.fromArray([0.1, 0.2, -0.3, 0.4], [2, 2]); // what backward() fills in
    bias.grad = TensorView.fromArray([1, -1], [2]);
    optimizer.step(); // then advance the lr schedule, then clear the grads
    schedule.step();
    optimizer.zeroGrad();
  }
  // --- end README example ---
  expect(optimizer.paramGroups[0]!.lr).toBeCloseTo(3e-4, 15);
  expect(optimizer.paramGroups[1]!.lr).toBeCloseTo(3e-3, 15);
  expect(weight.grad).toBeNull();
  // Warm-up starts at lr 0, then two Adam steps of ~lr each against the gradient's sign.
  const biasValues = bias.data.toArray();
  expect(biasValues[0]).toBeCloseTo(0.1 - 1e-3 - 2e-3, 5);
  expect(biasValues[1]).toBeCloseTo(0.2 + 1e-3 + 2e-3, 5);
  expect(weight.data.toArray()).not.toEqual([0.5, -0.25, 1, 2].map(Math.fround));
});
