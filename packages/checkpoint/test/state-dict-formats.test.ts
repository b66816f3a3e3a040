import { describe, expect, it } from 'vitest';
import { CheckpointError } from '../src/errors';
import { assembleRange } from '../src/state-dict/state-dict-formats';

/** "code: message" of the CheckpointError `fn` throws (a CheckpointError is an FsdpError, code included). */
function codeOf(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(CheckpointError);
    return `${(error as CheckpointError).code}: ${(error as Error).message}`;
  }
  return 'no error';
}

describe('state dicts of flat layouts', () => {
  it('assembleRange copies from overlapping pieces of any split and reports gaps', () => {
    const values = Float32Array.from({ length: 10 }, (_, index) => index);
    // saved at "world size 3" (4, 4, 2), read back as a range of "world size 2" (5, 5)
    const pieces = [
      { offset: 0, values: values.subarray(0, 4) },
      { offset: 4, values: values.subarray(4, 8) },
      { offset: 8, values: values.subarray(8, 10) },
      { offset: 4, values: values.subarray(4, 8) }, // a replica's copy
    ];
    const target = new Float32Array(5);
    assembleRange('w', pieces, 5, target);
    expect(Array.from(target)).toEqual([5, 6, 7, 8, 9]);
    expect(codeOf(() => assembleRange('w', [pieces[0]!, pieces[2]!], 2, new Float32Array(6)))).toMatch(
      /^state-dict-mismatch: w: elements \[4, 8\) are in none of the given shards/,
    );
  });
});
