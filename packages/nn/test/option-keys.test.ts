import { GPT, LayerNorm, Linear, NnError } from '@fsdp-ts/nn';
import { describe, expect, it } from 'vitest';

function nnErrorOf(run: () => unknown): NnError {
  try {
    run();
  } catch (error) {
    if (error instanceof NnError) return error;
    throw error;
  }
  throw new Error('expected an NnError, nothing was thrown');
}

const small = { vocabSize: 7, dModel: 8, nLayers: 1, nHeads: 2, seqLen: 4 };

describe('nn options reject unknown keys', () => {
  it("GPT's config names the nearest key and nanoGPT's names", () => {
    const typo = nnErrorOf(() => new GPT({ ...small, tieEmbedding: false } as never));
    expect(typo.code).toBe('unknown-option');
    expect(typo.message).toContain(
      "GPT got an unknown option: 'tieEmbedding' (did you mean 'tieEmbeddings'?)",
    );
    expect(nnErrorOf(() => new GPT({ ...small, n_layer: 2 } as never)).message).toContain(
      "nanoGPT's n_layer is nLayers here",
    );
  });

  it('layer options and loadStateDict options are checked', () => {
    expect(nnErrorOf(() => new Linear(2, 2, { biass: false } as never)).message).toContain(
      "did you mean 'bias'?",
    );
    expect(nnErrorOf(() => new LayerNorm(4, { eps: 1e-6 } as never)).message).toContain(
      'eps is epsilon here',
    );
    const model = new Linear(2, 2);
    const error = nnErrorOf(() => model.loadStateDict(model.stateDict(), { strinct: false } as never));
    expect(error.message).toContain("did you mean 'strict'?");
    expect(model.loadStateDict(model.stateDict(), { strict: true }).missingKeys).toEqual([]);
  });
});
