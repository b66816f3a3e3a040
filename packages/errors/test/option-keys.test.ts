import { describe, expect, it } from 'vitest';
import { checkOptionKeys, FsdpTsError, nearestName, type OptionKeys } from '../src/index';

interface ExampleOptions {
  shardingStrategy?: string;
  weightDecay?: number;
  group?: object;
}

const exampleKeys = {
  shardingStrategy: true,
  weightDecay: true,
  group: true,
} as const satisfies OptionKeys<ExampleOptions>;

class ExampleError extends FsdpTsError {
  static override readonly marker: string = 'fsdp-ts.error.ExampleError';
  readonly code = 'unknown-option';
}

function check(options: unknown, foreign: Record<string, string> = {}): ExampleError | undefined {
  try {
    checkOptionKeys(
      'Example',
      options,
      exampleKeys,
      foreign,
      (message, details) => new ExampleError(message, details),
    );
    return undefined;
  } catch (error) {
    if (error instanceof ExampleError) return error;
    throw error;
  }
}

describe('checkOptionKeys', () => {
  it('accepts known keys and non-objects', () => {
    expect(check({ shardingStrategy: 'x', group: {} })).toBeUndefined();
    expect(check(undefined)).toBeUndefined();
    expect(check({})).toBeUndefined();
  });

  it('names the nearest known key for a typo or a snake_case spelling', () => {
    const typo = check({ shardingStratgy: 'full-shard' });
    expect(typo?.message).toContain("'shardingStratgy' (did you mean 'shardingStrategy'?)");
    expect(typo?.actual).toEqual(['shardingStratgy']);
    expect(typo?.expected).toEqual(['shardingStrategy', 'weightDecay', 'group']);
    expect(check({ weight_decay: 0.1 })?.message).toContain("did you mean 'weightDecay'?");
  });

  it('rejects an unknown key whose value is undefined', () => {
    expect(check({ groups: undefined })?.message).toContain("'groups' (did you mean 'group'?)");
  });

  it("gives a foreign name's advice, by exact and by normalized name", () => {
    const foreign = { use_orig_params: 'no equivalent: parameters are always views' };
    expect(check({ use_orig_params: true }, foreign)?.message).toContain(
      "'use_orig_params' (no equivalent: parameters are always views)",
    );
    expect(check({ useOrigParams: true }, foreign)?.message).toContain('no equivalent');
  });

  it('lists every unknown key and says so when nothing is close', () => {
    const error = check({ zzz: 1, wieghtDecay: 2 });
    expect(error?.message).toContain(
      "unknown options: 'zzz' (no known option is close to it); 'wieghtDecay' (did you mean 'weightDecay'?)",
    );
    expect(error?.fix).toContain('the known options are shardingStrategy, weightDecay, group');
  });

  it('finds near names, flags included, and nothing for distant ones', () => {
    expect(nearestName('--nproc_per_node', ['--nnodes', '--nproc-per-node'])).toBe('--nproc-per-node');
    expect(nearestName('lt', ['lr', 'eps'])).toBe('lr');
    expect(nearestName('nmae', ['name', 'dtype'])).toBe('name');
    expect(nearestName('learningRate', ['lr', 'eps'])).toBeUndefined();
    expect(nearestName('minLr', ['minLrRatio', 'lr'])).toBe('minLrRatio');
    expect(nearestName('ep', ['epochs'])).toBeUndefined();
    expect(nearestName('keepLast', ['keep', 'step'])).toBe('keep');
  });
});
