import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Parameter, TensorView } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import { beforeAll, describe, expect, it } from 'vitest';
import { GPT, LayerNorm, Linear, Module, NnError, type StateDict, StateDictError } from '../src/index';
import { backends, useBackend } from './support/fixtures';

class Model extends Module {
  layer = this.registerModule('layer', new Linear(5, 5));
  forward(x: tf.Tensor) {
    return this.layer.forward(x);
  }
}

const small = { vocabSize: 7, dModel: 8, nLayers: 2, nHeads: 2, seqLen: 4 };

function checksum(model: Module): number {
  let sum = 0;
  let index = 0;
  for (const parameter of model.parameters())
    for (const value of parameter.data.toArray()) sum += value * (++index % 97);
  return sum;
}

describe.each(backends)('Module on %s', (backend) => {
  beforeAll(() => useBackend(backend));

  it('registers from class field initialisers and names parameters with dotted paths', () => {
    const model = new Model();
    expect(model.namedParameters().map(([name, parameter]) => [name, parameter.shape])).toEqual([
      ['layer.weight', [5, 5]],
      ['layer.bias', [5]],
    ]);
    expect(model.layer.parameters()).toEqual([model.layer.weight, model.layer.bias]);
    expect(model.namedModules().map(([name]) => name)).toEqual(['', 'layer']);
    expect(model.children()).toEqual([model.layer]);
    const output = tf.tidy(() => model.forward(tf.ones([3, 5])));
    expect(output.shape).toEqual([3, 5]);
    output.dispose();
  });

  it('lists a tied parameter once, under its first name', () => {
    const tied = new GPT({ ...small, tieEmbeddings: true });
    const untied = new GPT({ ...small, tieEmbeddings: false });
    const tiedNames = tied.namedParameters().map(([name]) => name);
    expect(tied.lmHead.weight).toBe(tied.tokenEmbedding.weight);
    expect(tiedNames).toContain('tokenEmbedding.weight');
    expect(tiedNames).not.toContain('lmHead.weight');
    expect(untied.namedParameters().map(([name]) => name)).toContain('lmHead.weight');
    expect(new Set(tied.parameters()).size).toBe(tied.parameters().length);
    expect(untied.parameters().length).toBe(tied.parameters().length + 1);
  });

  it('train(), eval() and apply() reach every descendant', () => {
    const model = new GPT(small);
    model.eval();
    expect(model.modules().every((module) => !module.training)).toBe(true);
    model.train();
    expect(model.modules().every((module) => module.training)).toBe(true);
    const visited: string[] = [];
    model.apply((module) => visited.push(module.constructor.name));
    expect(visited.at(-1)).toBe('GPT');
    expect(visited.filter((name) => name === 'TransformerBlock')).toHaveLength(2);
  });

  it('rejects duplicate and dotted names', () => {
    const model = new Model();
    expect(() => model.registerModule('layer', new Linear(1, 1))).toThrow(NnError);
    expect(() => model.registerParameter('a.b', Parameter.zeros([1]))).toThrow(/without dots/);
  });

  it('round-trips a state dict: another seed loads it and computes the same logits', () => {
    const source = new GPT({ ...small, seed: 1 });
    const target = new GPT({ ...small, seed: 2 });
    expect(checksum(source)).not.toBe(checksum(target));
    const dict = source.stateDict();
    expect(Object.keys(dict)).toEqual(source.namedParameters().map(([name]) => name));
    expect(dict['finalNorm.weight']).toBe(source.finalNorm.weight.data); // aliases, no copy
    const copied: StateDict = Object.fromEntries(
      Object.entries(dict).map(([name, view]) => [name, TensorView.fromArray(view.toArray(), view.shape)]),
    );
    expect(target.loadStateDict(copied)).toEqual({ missingKeys: [], unexpectedKeys: [] });
    expect(checksum(target)).toBe(checksum(source));
    const tokens = tf.tensor([[1, 2, 3, 4]], [1, 4], 'int32');
    const [first, second] = tf.tidy(() => [source.forward(tokens), target.forward(tokens)]);
    expect(Array.from(second!.dataSync())).toEqual(Array.from(first!.dataSync()));
    tf.dispose([first!, second!, tokens]);
  });

  it('strict loading lists every missing and unexpected key and every shape mismatch in one error', () => {
    const model = new GPT(small);
    const before = checksum(model);
    const dict = { ...model.stateDict() };
    delete dict['finalNorm.bias'];
    delete dict['blocks.1.mlp.inputProjection.weight'];
    dict['extra.weight'] = TensorView.zeros([2]);
    dict['finalNorm.weight'] = TensorView.zeros([9]);
    dict['positionEmbedding.weight'] = TensorView.zeros([5, 8]);
    let error: unknown;
    try {
      model.loadStateDict(dict);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(StateDictError);
    const mismatch = error as StateDictError;
    expect(mismatch.missingKeys).toEqual(['blocks.1.mlp.inputProjection.weight', 'finalNorm.bias']);
    expect(mismatch.unexpectedKeys).toEqual(['extra.weight']);
    expect(mismatch.shapeMismatches.map(({ key }) => key).sort()).toEqual([
      'finalNorm.weight',
      'positionEmbedding.weight',
    ]);
    for (const key of [
      'finalNorm.bias',
      'extra.weight',
      'positionEmbedding.weight',
      'expected [8], got [9]',
    ]) {
      expect(mismatch.message).toContain(key);
    }
    expect(checksum(model)).toBe(before); // nothing copied
  });

  it('accepts the other names of tied parameters, as PyTorch state dicts list them', () => {
    const model = new GPT({ ...small, tieEmbeddings: true, seed: 1 });
    const source = new GPT({ ...small, tieEmbeddings: true, seed: 2 });
    const dict = { ...source.stateDict(), 'lmHead.weight': source.tokenEmbedding.weight.data };
    expect(model.loadStateDict(dict)).toEqual({ missingKeys: [], unexpectedKeys: [] });
    expect(checksum(model)).toBe(checksum(source));
    expect(() => model.loadStateDict({ ...dict, 'lmHead.weight': TensorView.zeros([2, 2]) })).toThrow(
      /lmHead.weight: expected \[7, 8\]/,
    );
  });

  it("loads a tied parameter through any one of its names (safetensors' save_model keeps only lmHead.weight)", () => {
    const source = new GPT({ ...small, tieEmbeddings: true, seed: 2 });
    const saved: StateDict = { ...source.stateDict(), 'lmHead.weight': source.tokenEmbedding.weight.data };
    delete saved['tokenEmbedding.weight'];
    for (const strict of [false, true]) {
      const model = new GPT({ ...small, tieEmbeddings: true, seed: 1 });
      expect(model.loadStateDict(saved, { strict })).toEqual({ missingKeys: [], unexpectedKeys: [] });
      expect(model.tokenEmbedding.weight.data.toArray()).toEqual(source.tokenEmbedding.weight.data.toArray());
      expect(checksum(model)).toBe(checksum(source));
    }
    // Neither name: missing under its first name (strict throws, non-strict keeps the value).
    const model = new GPT({ ...small, tieEmbeddings: true, seed: 1 });
    const before = model.tokenEmbedding.weight.data.toArray();
    const withoutEither = { ...saved };
    delete withoutEither['lmHead.weight'];
    expect(() => model.loadStateDict(withoutEither)).toThrow(/missing keys: tokenEmbedding\.weight\b/);
    expect(model.loadStateDict(withoutEither, { strict: false }).missingKeys).toEqual([
      'tokenEmbedding.weight',
    ]);
    expect(model.tokenEmbedding.weight.data.toArray()).toEqual(before);
  });

  it('non-strict loading reports missing and unexpected keys and loads the rest', () => {
    const norm = new LayerNorm(3);
    const result = norm.loadStateDict(
      { weight: TensorView.fromArray([1, 2, 3], [3]), other: TensorView.zeros([1]) },
      { strict: false },
    );
    expect(result).toEqual({ missingKeys: ['bias'], unexpectedKeys: ['other'] });
    expect(norm.weight.data.toArray()).toEqual([1, 2, 3]);
  });

  it('initialises GPT-2 style: normal(0, 0.02), residual projections / sqrt(2 nLayers), LayerNorm 1 and 0', () => {
    const model = new GPT({ vocabSize: 64, dModel: 64, nLayers: 8, nHeads: 4, seqLen: 16 });
    const std = (parameter: Parameter) => {
      const values = parameter.data.toArray();
      const mean = values.reduce((sum, value) => sum + value, 0) / values.length;
      return Math.sqrt(values.reduce((sum, value) => sum + (value - mean) ** 2, 0) / values.length);
    };
    const block = model.blocks.at(3);
    expect(std(model.tokenEmbedding.weight)).toBeCloseTo(0.02, 3);
    expect(std(block.mlp.inputProjection.weight)).toBeCloseTo(0.02, 3);
    expect(std(block.mlp.outputProjection.weight)).toBeCloseTo(0.02 / 4, 3);
    expect(std(block.attention.outputProjection.weight)).toBeCloseTo(0.02 / 4, 3);
    expect(block.attention.inputProjection.bias!.data.toArray().every((value) => value === 0)).toBe(true);
    expect(block.mlpNorm.weight.data.toArray().every((value) => value === 1)).toBe(true);
    expect(block.mlpNorm.bias.data.toArray().every((value) => value === 0)).toBe(true);
  });
});

describe('seeded initialisation', () => {
  it('gives the same weights for the same seed, in this process and in another one', () => {
    const here = checksum(new GPT({ ...small, seed: 42 }));
    expect(checksum(new GPT({ ...small, seed: 42 }))).toBe(here);
    expect(checksum(new GPT({ ...small, seed: 43 }))).not.toBe(here);
    const script = fileURLToPath(new URL('./fixtures/print-checksum.ts', import.meta.url));
    const output = execFileSync(
      process.execPath,
      ['--conditions=@fsdp-ts/source', '--import', 'tsx', script],
      {
        encoding: 'utf8',
        timeout: 50_000,
      },
    );
    expect(Number(output.trim())).toBe(here);
  });
});
