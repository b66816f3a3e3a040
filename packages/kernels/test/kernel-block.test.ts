import { describe, expect, it } from 'vitest';
import {
  KERNEL_BLOCK_MINIMUM_ELEMENTS,
  KERNEL_BLOCK_SCRATCH_ELEMENTS,
  KERNEL_BLOCK_SLOTS,
  kernelBlock,
  kernelBlockOf,
} from '../src/index';

describe('kernel blocks ([Note: kernel blocks])', () => {
  it('gives no block below the minimum size', () => {
    expect(kernelBlock(KERNEL_BLOCK_MINIMUM_ELEMENTS - 1)).toBeNull();
  });

  it('holds the array and its slots in one memory, apart, zero-filled, each slot given once', () => {
    const numel = KERNEL_BLOCK_MINIMUM_ELEMENTS + 5;
    const block = kernelBlock(numel);
    expect(block).not.toBeNull();
    if (block === null) return;
    expect(block.array.length).toBe(numel);
    expect(block.array.byteOffset).toBe(0);
    const slots = KERNEL_BLOCK_SLOTS.map((slot) => block.take(slot)!);
    for (const slot of KERNEL_BLOCK_SLOTS) expect(block.take(slot)).toBeNull();
    const regions = [block.array, ...slots, block.scratch];
    expect(block.scratch.length).toBe(KERNEL_BLOCK_SCRATCH_ELEMENTS);
    for (const region of regions) {
      expect(kernelBlockOf(region)).toBe(block);
      expect(region.byteOffset % 64).toBe(0);
    }
    for (const slot of slots) {
      expect(slot.length).toBe(numel);
      expect(slot.every((value) => value === 0)).toBe(true);
    }
    // In address order, no two regions overlap, and no two start at the same offset within a page.
    for (let index = 1; index < regions.length; index++) {
      const [before, after] = [regions[index - 1]!, regions[index]!];
      expect(after.byteOffset).toBeGreaterThanOrEqual(before.byteOffset + before.byteLength);
    }
    expect(new Set(regions.map((region) => region.byteOffset % 4096)).size).toBe(regions.length);
    // Writes to one region stay in it.
    slots[0]!.fill(7);
    expect(block.array.every((value) => value === 0)).toBe(true);
    expect(slots[1]!.every((value) => value === 0)).toBe(true);
  });

  it('answers null for arrays outside any block', () => {
    expect(kernelBlockOf(new Float32Array(KERNEL_BLOCK_MINIMUM_ELEMENTS))).toBeNull();
  });
});
