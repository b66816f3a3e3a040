import { Parameter, Storage, TensorError, TensorView } from '@fsdp-ts/tensor';
import { describe, expect, it } from 'vitest';

function tensorErrorOf(run: () => unknown): TensorError {
  try {
    run();
  } catch (error) {
    if (error instanceof TensorError) return error;
    throw error;
  }
  throw new Error('expected a TensorError, nothing was thrown');
}

describe('Parameter and Storage options reject unknown keys', () => {
  it("names the nearest key and PyTorch's requires_grad", () => {
    const typo = tensorErrorOf(() => Parameter.zeros([2], { nmae: 'w' } as never));
    expect(typo.code).toBe('unknown-option');
    expect(typo.message).toContain("Parameter.zeros got an unknown option: 'nmae' (did you mean 'name'?)");
    expect(
      tensorErrorOf(() => Parameter.fromArray([1], [1], { requires_grad: false } as never)).message,
    ).toContain("PyTorch's requires_grad is requiresGrad here");
    expect(
      tensorErrorOf(() => new Parameter(TensorView.zeros([1]), { dtype: 'float32' } as never)).code,
    ).toBe('unknown-option');
    expect(tensorErrorOf(() => Storage.allocate('float32', 4, { share: true } as never)).message).toContain(
      "did you mean 'shared'?",
    );
    const parameter = Parameter.zeros([2], {
      name: 'w',
      requiresGrad: false,
      shared: true,
      dtype: 'float32',
    });
    expect([parameter.name, parameter.requiresGrad]).toEqual(['w', false]);
  });
});
