import { describe, expect, it } from 'vitest';
import {
  CheckpointError,
  CollectiveError,
  FlatParamError,
  FsdpError,
  FsdpTsError,
  NnError,
  OptimError,
  StateDictError,
  StorageFreedError,
  TensorError,
} from '../src/index';

// One error base for every package ([Note: errors across package copies]), CollectiveError included.
const errors = [
  new CollectiveError('c', { code: 'timeout', fix: 'wait longer.' }),
  new TensorError('t', { code: 'storage-freed' }),
  new StorageFreedError('read'),
  new FlatParamError('f', { code: 'invalid-argument' }),
  new NnError('n', { code: 'invalid-argument' }),
  new StateDictError(['a'], [], []),
  new OptimError('o', { code: 'invalid-group' }),
  new FsdpError('s', { code: 'wrong-state' }),
  new CheckpointError('k', { reason: 'io' }),
];

describe('the shared error base', () => {
  it('every package error is an FsdpTsError, by isInstance and instanceof', () => {
    for (const error of errors) {
      expect(FsdpTsError.isInstance(error), error.name).toBe(true);
      expect(error instanceof FsdpTsError, error.name).toBe(true);
    }
    expect(FsdpTsError.isInstance(new Error('plain'))).toBe(false);
  });

  it('each class recognises its own instances and subclasses only', () => {
    const [collective, tensor, freed, , nn, stateDict, , fsdp, checkpoint] = errors;
    expect(CollectiveError.isInstance(collective)).toBe(true);
    expect(CollectiveError.isInstance(tensor)).toBe(false);
    expect(tensor instanceof CollectiveError).toBe(false);
    expect(freed instanceof TensorError && !(tensor instanceof StorageFreedError)).toBe(true);
    expect(StateDictError.isInstance(stateDict) && !StateDictError.isInstance(nn)).toBe(true);
    expect(checkpoint instanceof FsdpError && !(fsdp instanceof CheckpointError)).toBe(true);
    expect(collective!.message).toBe('c Fix: wait longer.');
  });

  it('an error from another copy of a package (same markers, other class) is recognised', () => {
    const foreign = new Error('from another copy of @fsdp-ts/fsdp');
    Object.defineProperty(foreign, Symbol.for('fsdp-ts.error'), { value: true });
    Object.defineProperty(foreign, Symbol.for('fsdp-ts.error.FsdpError'), { value: true });
    expect(FsdpError.isInstance(foreign) && foreign instanceof FsdpError).toBe(true);
    expect(foreign instanceof CheckpointError).toBe(false);
  });
});
