import { describe, expect, it } from 'vitest';
import { CollectiveError } from '../src/errors.js';
import { blockAliasing, checkAliasing } from '../src/internal/aliasing.js';
import { createArena, reserve, type SharedMemory } from '../src/internal/shm/shm-arena.js';

/** [Note: in-place all-gather and reduce-scatter]: which views are in place, separate, or refused. */
describe('input and output aliasing of all-gather and reduce-scatter', () => {
  const whole = new Float32Array(new SharedArrayBuffer(4 * 4 * 10)); // 4 blocks of 10 at size 4

  it('is in place exactly when the part is block `rank` of the whole', () => {
    for (let rank = 0; rank < 4; rank++) {
      expect(blockAliasing(whole, whole.subarray(rank * 10, rank * 10 + 10), rank, null)).toBe('in place');
      // The right bytes for another rank are an overlap for this one.
      expect(
        blockAliasing(whole, whole.subarray(((rank + 1) % 4) * 10, ((rank + 1) % 4) * 10 + 10), rank, null),
      ).toBe('overlap');
    }
    expect(blockAliasing(whole, whole.subarray(1, 11), 0, null)).toBe('overlap');
    expect(blockAliasing(whole, new Float32Array(10), 0, null)).toBe('separate');
    expect(blockAliasing(whole, new Float32Array(new SharedArrayBuffer(40)), 0, null)).toBe('separate');
  });

  it('takes views of one buffer that share no byte as separate, and empty views as separate', () => {
    const memory = new SharedArrayBuffer(4 * 60);
    const output = new Float32Array(memory, 0, 40);
    expect(blockAliasing(output, new Float32Array(memory, 160, 10), 1, null)).toBe('separate');
    expect(blockAliasing(output, new Float32Array(memory, 156, 10), 1, null)).toBe('overlap');
    expect(blockAliasing(output, output.subarray(0, 0), 0, null)).toBe('separate');
  });

  it('compares arena views by address even when their SharedArrayBuffer objects differ (the arena grew between them)', () => {
    const arena = createArena() as SharedMemory;
    const wholeAddress = reserve(arena, 4 * 2 * 10)!;
    const outputBefore = new Float32Array(arena.buffer, wholeAddress, 20);
    reserve(arena, 1 << 20); // grows the memory: a new buffer object from now on
    const later = arena.buffer;
    expect(later).not.toBe(outputBefore.buffer);
    const inPlace = new Float32Array(later, wholeAddress + 40, 10);
    const shifted = new Float32Array(later, wholeAddress + 36, 10);
    expect(blockAliasing(outputBefore, inPlace, 1, arena)).toBe('in place');
    expect(blockAliasing(outputBefore, shifted, 1, arena)).toBe('overlap');
    // Without the arena, different buffer objects cannot be compared.
    expect(blockAliasing(outputBefore, shifted, 1, null)).toBe('separate');
  });

  it('refuses an overlap with a typed error: what was expected, what came, and the subarray to pass', () => {
    const input = new Int32Array(new SharedArrayBuffer(4 * 31));
    const output = input.subarray(12, 22); // rank 1's block would be 10..20
    let error: unknown;
    try {
      checkAliasing('reduceScatter', 1, output, input.subarray(0, 30), null);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(CollectiveError);
    const refusal = error as CollectiveError;
    expect(refusal.code).toBe('invalid-argument');
    expect(refusal.op).toBe('reduceScatter');
    expect(refusal.rank).toBe(1);
    expect(refusal.message).toContain('the output overlaps the input');
    expect(refusal.expected).toContain('bytes 40..80 (in place)');
    expect(refusal.actual).toBe('output at bytes 48..88, input at bytes 0..120');
    expect(refusal.fix).toContain('input.subarray(1 * 10, 2 * 10)');
    expect(checkAliasing('allGather', 2, whole, whole.subarray(20, 30), null)).toBe('in place');
    expect(checkAliasing('allGather', 2, whole, new Float32Array(10), null)).toBe('separate');
  });
});
