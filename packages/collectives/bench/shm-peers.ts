/**
 * The shm sweep's peers, measured in the benchmark's own run before and after each sweep
 * (bench/memory-peer.ts): n threads copying and filling 16 MiB at once, the arena all-reduce's
 * in-place floor, and each 16 MiB float32 op's data floor (its data work alone), with how the
 * benchmark prints them and compares rows against them.
 */
import {
  type CopyPeer,
  type FloorCase,
  type InPlaceFloor,
  measureCopyPeer,
  measureDataFloor,
  measureInPlaceFloor,
} from './memory-peer.js';
import { busFactor, type SweepRow } from './sweep.js';

const MiB = 1 << 20;

/** One measurement of every peer (before or after a sweep). */
export interface ShmPeerSnapshot {
  copy: CopyPeer;
  fill: CopyPeer;
  inPlaceFloor: InPlaceFloor;
  dataFloors: { floor: FloorCase; result: InPlaceFloor }[];
}

/** The peers before and after a sweep. */
export interface ShmPeers {
  /** `worldSize` threads copying 16 MiB each at once. */
  copyPeer: { before: CopyPeer; after: CopyPeer };
  /** `worldSize` threads filling 16 MiB each at once (writes only). */
  fillPeer: { before: CopyPeer; after: CopyPeer };
  /** The data part alone of a 16 MiB in-place all-reduce. */
  inPlaceFloor: { before: InPlaceFloor; after: InPlaceFloor };
  /** Each 16 MiB float32 op's data work alone (measureDataFloor). */
  dataFloors: { floor: FloorCase; before: InPlaceFloor; after: InPlaceFloor }[];
}

/** The ops, forms and placements whose 16 MiB float32 data floor the shm sweep measures. */
const FLOOR_CASES: FloorCase[] = (['allReduce', 'allGather', 'reduceScatter'] as const).flatMap((op) =>
  (op === 'allReduce' ? (['out-of-place'] as const) : (['out-of-place', 'in-place'] as const)).flatMap(
    (form) => (['arena', 'plain'] as const).map((placement) => ({ op, form, placement })),
  ),
);

export async function measureShmPeers(worldSize: number): Promise<ShmPeerSnapshot> {
  const copy = await measureCopyPeer(worldSize);
  const fill = await measureCopyPeer(worldSize, 'fill');
  const inPlaceFloor = await measureInPlaceFloor(worldSize);
  const dataFloors: ShmPeerSnapshot['dataFloors'] = [];
  for (const floor of FLOOR_CASES)
    dataFloors.push({ floor, result: await measureDataFloor(worldSize, floor) });
  return { copy, fill, inPlaceFloor, dataFloors };
}

export function combineShmPeers(before: ShmPeerSnapshot, after: ShmPeerSnapshot): ShmPeers {
  return {
    copyPeer: { before: before.copy, after: after.copy },
    fillPeer: { before: before.fill, after: after.fill },
    inPlaceFloor: { before: before.inPlaceFloor, after: after.inPlaceFloor },
    dataFloors: before.dataFloors.map(({ floor, result }, index) => ({
      floor,
      before: result,
      after: after.dataFloors[index]!.result,
    })),
  };
}

/** The shm ranks' copy rate: the median of the rates measured before and after their sweep. */
export function copyPeerRate(peers: ShmPeers): number {
  return (peers.copyPeer.before.median + peers.copyPeer.after.median) / 2;
}

/** Bytes of a 16 MiB float32 case at `worldSize` (rounded down to whole blocks, as the sweep does). */
function floorBytes(worldSize: number): number {
  return Math.floor((16 * MiB) / 4 / worldSize) * worldSize * 4;
}

/**
 * The busbw of a 16 MiB float32 shm row's data floor (its data work alone, the mean of the
 * medians before and after the sweep), or undefined when none was measured for it.
 */
export function floorBusbw(peers: ShmPeers, row: SweepRow, worldSize: number): number | undefined {
  if (row.variant !== 'float32' || row.bytes !== floorBytes(worldSize)) return undefined;
  const measured = peers.dataFloors.find(
    ({ floor }) => floor.op === row.op && floor.form === row.form && floor.placement === row.placement,
  );
  if (measured === undefined) return undefined;
  const ms = (measured.before.medianMs + measured.after.medianMs) / 2;
  return (row.bytes / (ms / 1000) / 1e9) * busFactor(row.op, worldSize);
}

/** The peers' lines above an shm table. */
export function printShmPeers(peers: ShmPeers, worldSize: number, uptime: () => string): void {
  const { copyPeer, fillPeer, dataFloors, inPlaceFloor } = peers;
  console.log(
    `${worldSize} threads copying 16 MiB each at once, per thread: median ${copyPeer.before.median.toFixed(2)} GB/s before the sweep, ${copyPeer.after.median.toFixed(2)} after (${uptime()}); ceiling = the busbw of an op that only moves its bytes at that rate`,
  );
  console.log(
    `${worldSize} threads filling 16 MiB each at once (Float32Array.fill: writes only), per thread: median ${fillPeer.before.median.toFixed(2)} GB/s before the sweep, ${fillPeer.after.median.toFixed(2)} after (${uptime()}); a written line is fetched first (write-allocate), so a fill costs about what a copy does`,
  );
  console.log(
    `${worldSize} threads each doing its rank's data work of a 16 MiB float32 op at once, with the engine's own functions and buffers shared as the op shares them, buffers out of the cache (no messages, wake-ups or finish phase): ms median [min .. max] before the sweep, after; the busbw that is (${uptime()}${worldSize > 2 ? '; more threads than cores: the floors include time slicing' : ''})`,
  );
  for (const { floor, before, after } of dataFloors) {
    const busbw =
      (floorBytes(worldSize) / ((before.medianMs + after.medianMs) / 2 / 1000) / 1e9) *
      busFactor(floor.op, worldSize);
    console.log(
      `  ${floor.op.padEnd(14)}${`${floor.form}, ${floor.placement}`.padEnd(20)}${before.medianMs.toFixed(2)} [${before.bestMs.toFixed(2)} .. ${before.worstMs.toFixed(2)}], ${after.medianMs.toFixed(2)} [${after.bestMs.toFixed(2)} .. ${after.worstMs.toFixed(2)}] ms: floor busbw ${busbw.toFixed(2)} GB/s`,
    );
  }
  const busbw = (ms: number) => ((16 * MiB) / (ms / 1000) / 1e9) * ((2 * (worldSize - 1)) / worldSize);
  const { before, after } = inPlaceFloor;
  console.log(
    `${worldSize} threads each reducing its part of a 16 MiB float32 all-reduce in the arena at once (the data alone, no messages or wake-ups): median ${before.medianMs.toFixed(2)} ms [${before.bestMs.toFixed(2)} .. ${before.worstMs.toFixed(2)}] before the sweep, ${after.medianMs.toFixed(2)} after: an all-reduce busbw of ${busbw((before.medianMs + after.medianMs) / 2).toFixed(2)} GB/s with no fixed cost (${uptime()})`,
  );
}
