import type { CollectiveBuffer } from '../../types.js';

/** Elements per all-gather block: small enough to stay in L2 between its n copies. */
const GATHER_BLOCK = 65_536;

/**
 * The shm all-gather's data work on one rank: its `input` copied into every view of `targets`
 * (the ranks' outputs) from element `offset` on, block by block, so the input is read from
 * memory once and written once per target (n + 1 passes, not 2n as pulling every input into
 * one's own output would take). In place the rank's own output is not a target
 * ([Note: in-place all-gather and reduce-scatter]).
 */
export function pushGather(
  input: CollectiveBuffer,
  targets: readonly CollectiveBuffer[],
  offset: number,
): void {
  const count = input.length;
  for (let start = 0; start < count; start += GATHER_BLOCK) {
    const block = input.subarray(start, Math.min(count, start + GATHER_BLOCK));
    for (const target of targets) target.set(block as never, offset + start);
  }
}
