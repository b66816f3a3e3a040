import { OptimError, type OptimizerStateDict } from '@fsdp-ts/optim';
import { Parameter, TensorView } from '@fsdp-ts/tensor';
import { describe, expect, it } from 'vitest';
import { fixtureParameters, fixtures, makeOptimizer, type OptimizerCase } from './support/torch-fixtures';

const caseNames = [
  'sgd nesterov weight decay',
  'adam maximize amsgrad eps',
  'adamw param groups',
  'lamb trust clip',
  'lars trust clip dampening',
];

function setGrads(params: Parameter[], step: number): void {
  params.forEach((param, index) => {
    param.grad = TensorView.fromArray(fixtures.grads[step]![index]!, param.shape);
  });
}

function copyOf(params: Parameter[]): Parameter[] {
  return params.map((param) => Parameter.fromArray(param.data.toArray(), param.shape, { name: param.name }));
}

describe('stateDict / loadStateDict', () => {
  for (const name of caseNames) {
    const testCase = fixtures.cases.find((candidate) => candidate.name === name) as OptimizerCase;
    it(`${testCase.optimizer} (${name}): a mid-training round trip continues identically`, () => {
      const params = fixtureParameters();
      const optimizer = makeOptimizer(testCase, params);
      for (let step = 0; step < 10; step++) {
        setGrads(params, step);
        optimizer.step();
      }
      optimizer.paramGroups[0]!.lr *= 0.5; // hyperparameters travel with the state
      const saved = optimizer.stateDict();
      const resumedParams = copyOf(params);
      const resumed = makeOptimizer(testCase, resumedParams);
      resumed.loadStateDict(saved);
      expect(resumed.paramGroups[0]!.lr).toBe(optimizer.paramGroups[0]!.lr);
      for (let step = 10; step < fixtures.steps; step++) {
        setGrads(params, step);
        optimizer.step();
        setGrads(resumedParams, step);
        resumed.step();
      }
      resumedParams.forEach((param, index) => {
        expect(param.data.toArray()).toEqual(params[index]!.data.toArray());
      });
      expect(resumed.stateDict()).toEqual(optimizer.stateDict());
    });
  }

  it('returns copies: later steps do not change a saved state dict, nor a loaded one the source', () => {
    const params = fixtureParameters();
    const testCase = fixtures.cases.find((candidate) => candidate.name === 'adam default')!;
    const optimizer = makeOptimizer(testCase, params);
    setGrads(params, 0);
    optimizer.step();
    const saved = optimizer.stateDict();
    const before = Array.from(saved.state[0]!.buffers.expAvg!);
    optimizer.step();
    expect(Array.from(saved.state[0]!.buffers.expAvg!)).toEqual(before);
    expect(saved.state[0]).toMatchObject({ name: 'encoder.weight', shape: [3, 4], numel: 12, step: 1 });
  });

  it('with { copy: false }, aliases the live state both ways (no copy of the buffers)', () => {
    const params = fixtureParameters();
    const testCase = fixtures.cases.find((candidate) => candidate.name === 'adam default')!;
    const optimizer = makeOptimizer(testCase, params);
    setGrads(params, 0);
    optimizer.step();
    const view = optimizer.stateDict({ copy: false });
    const live = view.state[0]!.buffers.expAvg!;
    // The view's buffer is the state: the next step changes it, and a write to it changes the state.
    const before = Array.from(live);
    setGrads(params, 1);
    optimizer.step();
    expect(Array.from(live)).not.toEqual(before);
    live[0] = 42;
    expect(optimizer.stateDict().state[0]!.buffers.expAvg![0]).toBe(42);
    // A load without copies keeps the given arrays as the state.
    const other = makeOptimizer(testCase, copyOf(params));
    const saved = optimizer.stateDict();
    other.loadStateDict(saved, { copy: false });
    expect(other.stateDict({ copy: false }).state[0]!.buffers.expAvg).toBe(saved.state[0]!.buffers.expAvg);
    expect(other.stateDict()).toEqual(optimizer.stateDict());
    // A buffer that is not a Float32Array is refused (it would become the state as it is).
    const plain = optimizer.stateDict();
    plain.state[0]!.buffers.expAvg = Array.from(plain.state[0]!.buffers.expAvg!) as unknown as Float32Array;
    expect(() => other.loadStateDict(plain, { copy: false })).toThrow(/not a Float32Array/);
    expect(() => other.loadStateDict(plain)).not.toThrow();
  });

  it('with { buffers: false }, saves and loads steps and hyperparameters alone (buffers stay)', () => {
    const params = fixtureParameters();
    const testCase = fixtures.cases.find((candidate) => candidate.name === 'adam default')!;
    const optimizer = makeOptimizer(testCase, params);
    setGrads(params, 0);
    optimizer.step();
    optimizer.step();
    const steps = optimizer.stateDict({ buffers: false });
    expect(steps.state[0]).toMatchObject({ name: 'encoder.weight', numel: 12, step: 2, buffers: {} });
    const otherParams = copyOf(params);
    const other = makeOptimizer(testCase, otherParams);
    setGrads(otherParams, 1);
    other.step();
    const kept = other.stateDict({ copy: false }).state[0]!.buffers.expAvg!;
    other.loadStateDict(steps, { buffers: false });
    // The step comes from the dict; the buffer is still the one `other` had (the same array).
    expect(other.stateDict({ buffers: false }).state[0]!.step).toBe(2);
    expect(other.stateDict({ copy: false }).state[0]!.buffers.expAvg).toBe(kept);
  });

  describe('clear errors, and nothing changes when a load is refused', () => {
    function trained(): { params: Parameter[]; saved: OptimizerStateDict } {
      const params = fixtureParameters();
      const optimizer = makeOptimizer(fixtures.cases.find(({ name }) => name === 'adam default')!, params);
      setGrads(params, 0);
      optimizer.step();
      return { params, saved: optimizer.stateDict() };
    }

    function refusal(saved: OptimizerStateDict, params: Parameter[], kind = 'adam default'): OptimError {
      const optimizer = makeOptimizer(fixtures.cases.find(({ name }) => name === kind)!, params);
      const before = optimizer.stateDict();
      try {
        optimizer.loadStateDict(saved);
      } catch (error) {
        expect(error).toBeInstanceOf(OptimError);
        expect((error as OptimError).code).toBe('state-dict-mismatch');
        expect(optimizer.stateDict()).toEqual(before);
        return error as OptimError;
      }
      throw new Error('expected loadStateDict to refuse');
    }

    it('a state dict of another shape', () => {
      const { saved } = trained();
      const other = fixtureParameters();
      other[0] = Parameter.zeros([4, 3], { name: 'encoder.weight' });
      const error = refusal(saved, other);
      expect(error.message).toContain('shape [4, 3]');
      expect(error.message).toContain('[3, 4]');
    });

    it('a state dict saved under another sharding (element count)', () => {
      const { saved } = trained();
      const other = fixtureParameters();
      other[0]!.data = other[0]!.data.flatten().narrow(0, 0, 6);
      expect(refusal(saved, other).message).toContain('covers 12');
    });

    it('parameters in another order (names differ)', () => {
      const { saved } = trained();
      const other = fixtureParameters();
      const swapped = [other[0]!, other[1]!, other[2]!, other[3]!];
      swapped[1] = Parameter.zeros([5], { name: 'decoder.bias' });
      expect(refusal(saved, swapped).message).toContain("'decoder.bias'");
    });

    it('another optimizer, or other groups', () => {
      const { saved } = trained();
      expect(refusal(saved, fixtureParameters(), 'adamw default').message).toContain('saved by Adam');
      expect(refusal(saved, fixtureParameters(), 'adamw param groups').message).toContain('AdamW');
      const twoGroups = { ...saved, paramGroups: [...saved.paramGroups, ...saved.paramGroups] };
      expect(refusal(twoGroups, fixtureParameters()).message).toContain('2 param groups');
    });
  });
});
