import { FlatParamError } from '../errors';

/** The FlatParamErrors FlatParamHandle throws, kept here so the handle reads as its state machine. */

export function wrongState(method: string, expected: string, actual: string): FlatParamError {
  return new FlatParamError(`${method} needs state '${expected}', but the unit is '${actual}'.`, {
    code: 'invalid-state',
    expected,
    actual,
    fix:
      expected === 'sharded'
        ? 'call useShardedViews() first (each transition is called once per switch).'
        : 'call unshardedBuffer(), fill it, and useUnshardedViews() first.',
  });
}

export function unshardedBufferFreed(): FlatParamError {
  return new FlatParamError('useUnshardedViews() needs the unsharded buffer, but it is freed.', {
    code: 'invalid-state',
    expected: 'an allocated unsharded buffer holding the gathered shards',
    actual: 'freed',
    fix: 'call unshardedBuffer(), all-gather every rank’s shardedBuffer() into it, then useUnshardedViews().',
  });
}

export function unknownIndex(index: number, count: number): FlatParamError {
  return new FlatParamError(`No parameter at index ${index}: the unit has ${count}.`, {
    code: 'unknown-parameter',
    expected: `an index in [0, ${count})`,
    actual: index,
    fix: 'use handle.indexOf(nameOrParameter).',
  });
}

export function notInUnit(parameter: unknown): FlatParamError {
  return new FlatParamError(`${String(parameter)} is not a parameter of this unit.`, {
    code: 'unknown-parameter',
    expected: 'a Parameter passed to FlatParamHandle.create for this unit',
    actual: String(parameter),
    fix: 'look the parameter up in the handle of the unit that owns it.',
  });
}
