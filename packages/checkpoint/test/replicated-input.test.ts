import { describe, expect, it } from 'vitest';
import { CheckpointError } from '../src/errors';
import { checkReplicatedInput, type ReplicatedStateInput } from '../src/format/replicated-state';
import { extraAsJson } from '../src/writer/write-checkpoint';

/** The CheckpointError a save's input check throws (fails the test when nothing is thrown). */
function rejection(input: ReplicatedStateInput): CheckpointError {
  try {
    checkReplicatedInput(input);
  } catch (error) {
    expect(CheckpointError.isInstance(error)).toBe(true);
    return error as CheckpointError;
  }
  throw new Error('checkReplicatedInput accepted bad input');
}

describe('bad buffers and documents given to a checkpoint save', () => {
  it('accepts what the format holds', () => {
    expect(() =>
      checkReplicatedInput({
        buffers: { mean: { dtype: 'float32', shape: [2, 2], values: new Float32Array(4) } },
        documents: { progress: { epoch: 1 }, raw: new Uint8Array([1]) },
      }),
    ).not.toThrow();
  });

  for (const [what, input, expected, actual, fix] of [
    [
      'a dtype that is not a tensor dtype',
      { buffers: { mean: { dtype: 'float64', shape: [2], values: new Float64Array(2) } } },
      /tensor dtype/,
      /"float64"/,
      /dtype of its values/,
    ],
    [
      'values of another dtype',
      { buffers: { mean: { dtype: 'float32', shape: [2], values: new Int32Array(2) } } },
      /Float32Array/,
      /Int32Array/,
      /as a Float32Array/,
    ],
    [
      'a shape that does not hold the values',
      { buffers: { mean: { dtype: 'int32', shape: [2, 3], values: new Int32Array(5) } } },
      /6 values \(shape \[2, 3\]\)/,
      /5 values/,
      /as many values as the shape holds/,
    ],
    [
      'a shape with a negative size',
      { buffers: { mean: { dtype: 'int32', shape: [-1], values: new Int32Array(1) } } },
      /non-negative integer sizes/,
      /\[-1\]/,
      /list of sizes/,
    ],
    [
      'an empty buffer name',
      { buffers: { '': { dtype: 'int32', shape: [1], values: new Int32Array(1) } } },
      /non-empty buffer name/,
      /''/,
      /give every buffer a name/,
    ],
    [
      'a document JSON cannot hold',
      { documents: { progress: { step: 1n } } },
      /JSON value/,
      /JSON\.stringify rejects/,
      /BigInts/,
    ],
    [
      'a function as a document',
      { documents: { progress: () => 1 } },
      /JSON value/,
      /function/,
      /Uint8Array/,
    ],
  ] as const) {
    it(`${what}: reason 'invalid-input', saying what was expected, what came and how to fix it`, () => {
      const error = rejection(input as unknown as ReplicatedStateInput);
      expect(error.reason).toBe('invalid-input');
      expect(String(error.expected)).toMatch(expected);
      expect(String(error.actual)).toMatch(actual);
      expect(error.fix).toMatch(fix);
      expect(error.message).toMatch(expected);
      expect(error.message).toMatch(actual);
      expect(error.message).toMatch(fix);
    });
  }
});

describe("a checkpoint's extra that JSON cannot hold", () => {
  it('keeps a JSON value as its plain copy, and absent as null', () => {
    expect(extraAsJson({ epoch: 2, order: [3, 1] })).toEqual({ epoch: 2, order: [3, 1] });
    expect(extraAsJson(undefined)).toBeNull();
  });

  const cycle: Record<string, unknown> = {};
  cycle.self = cycle;
  for (const [what, extra, actual, fix] of [
    ['a BigInt', { seed: 1n }, /BigInt/, /BigInts/],
    ['a cycle', cycle, /circular/i, /cycles/],
    ['a function', () => 1, /function/, /JSON value/],
  ] as const) {
    it(`${what}: reason 'invalid-input', saying what was expected, what came and how to fix it`, () => {
      let thrown: unknown;
      try {
        extraAsJson(extra);
      } catch (error) {
        thrown = error;
      }
      expect(CheckpointError.isInstance(thrown)).toBe(true);
      const error = thrown as CheckpointError;
      expect(error.reason).toBe('invalid-input');
      expect(String(error.expected)).toMatch(/JSON value/);
      expect(String(error.actual)).toMatch(actual);
      expect(error.fix).toMatch(fix);
    });
  }
});
