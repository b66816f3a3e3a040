import { LambdaLR, LinearWarmupCosineLR, type LRScheduler, OptimError, SGD, StepLR } from '@fsdp-ts/optim';
import { Parameter } from '@fsdp-ts/tensor';
import { describe, expect, it } from 'vitest';
import { fixtures } from './support/torch-fixtures';

/** Two groups with base lrs 0.1 and 0.02, as in make-fixtures.py. */
function twoGroupOptimizer(): SGD {
  return new SGD([
    { params: [Parameter.zeros([1])], lr: 0.1 },
    { params: [Parameter.zeros([1])], lr: 0.02 },
  ]);
}

function lrs(optimizer: SGD): number[] {
  return optimizer.paramGroups.map(({ lr }) => lr);
}

// Reference: torch.optim.lr_scheduler (StepLR; LambdaLR with the same warm-up/cosine formula),
// PyTorch 1.13. Tolerance 1e-12 relative (both compute in float64).
describe('LR schedules against torch.optim.lr_scheduler', () => {
  for (const schedule of fixtures.schedules) {
    it(`${schedule.kind}: the lr of every group after each step`, () => {
      const optimizer = twoGroupOptimizer();
      const scheduler: LRScheduler =
        schedule.kind === 'StepLR'
          ? new StepLR(optimizer, { stepSize: schedule.options.stepSize!, gamma: schedule.options.gamma! })
          : new LinearWarmupCosineLR(optimizer, {
              warmupSteps: schedule.options.warmupSteps!,
              totalSteps: schedule.options.totalSteps!,
              minLrRatio: schedule.options.minLrRatio!,
            });
      schedule.lrs.forEach((expected, epoch) => {
        if (epoch > 0) {
          optimizer.step();
          scheduler.step();
        }
        lrs(optimizer).forEach((lr, index) => {
          expect(Math.abs(lr - expected[index]!)).toBeLessThanOrEqual(1e-12 * Math.abs(expected[index]!));
        });
        expect(scheduler.getLastLr()).toEqual(lrs(optimizer));
      });
    });
  }
});

describe('LR schedules', () => {
  it('LambdaLR takes one function per group', () => {
    const optimizer = twoGroupOptimizer();
    const scheduler = new LambdaLR(optimizer, [(epoch) => 1 / (epoch + 1), (epoch) => epoch]);
    expect(lrs(optimizer)).toEqual([0.1, 0]);
    scheduler.step();
    scheduler.step();
    expect(lrs(optimizer)).toEqual([0.1 / 3, 0.04]);
    expect(() => new LambdaLR(optimizer, [(epoch) => epoch])).toThrow(OptimError);
  });

  it('a loaded state dict resumes the schedule where it was', () => {
    const first = twoGroupOptimizer();
    const scheduler = new LinearWarmupCosineLR(first, { warmupSteps: 2, totalSteps: 8 });
    for (let step = 0; step < 5; step++) scheduler.step();
    const second = twoGroupOptimizer();
    const resumed = new LinearWarmupCosineLR(second, { warmupSteps: 2, totalSteps: 8 });
    resumed.loadStateDict(scheduler.stateDict());
    expect(lrs(second)).toEqual(lrs(first));
    scheduler.step();
    resumed.step();
    expect(lrs(second)).toEqual(lrs(first));
  });

  it('warm-up starts at 0, reaches the base lr, and the cosine stays at its floor after totalSteps', () => {
    const optimizer = twoGroupOptimizer();
    const scheduler = new LinearWarmupCosineLR(optimizer, {
      warmupSteps: 4,
      totalSteps: 10,
      minLrRatio: 0.1,
    });
    expect(lrs(optimizer)).toEqual([0, 0]);
    for (let step = 0; step < 4; step++) scheduler.step();
    expect(lrs(optimizer)[0]).toBeCloseTo(0.1, 15);
    for (let step = 0; step < 20; step++) scheduler.step();
    expect(lrs(optimizer)[0]).toBeCloseTo(0.01, 15);
    expect(() => new LinearWarmupCosineLR(optimizer, { warmupSteps: 5, totalSteps: 4 })).toThrow(OptimError);
    expect(() => new StepLR(optimizer, { stepSize: 0 })).toThrow(OptimError);
  });
});
