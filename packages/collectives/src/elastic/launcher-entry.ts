import { describeRanks } from '../launcher/rank-range.js';

/**
 * What the rendezvous server knows of one connected launcher. State: 'waiting' (joined, in no
 * round) → 'member' (in the running round) → 'stopping' (told to stop; back to 'waiting' when it
 * joins again). Lost launchers are removed, never revived: a launcher that comes back joins anew.
 */
export interface LauncherEntry {
  /** The zeromq routing id of its DEALER, hex (the map key). */
  readonly id: string;
  readonly routingId: Buffer;
  readonly token: string;
  readonly name: string;
  readonly nproc: number;
  /** Order of first arrival: new launchers get node ranks after those already placed. */
  readonly arrival: number;
  state: 'waiting' | 'member' | 'stopping';
  /** ms (performance.now) of its last message. */
  lastSeen: number;
  /** Node rank in the latest round it was a member of. */
  nodeRank: number | undefined;
  /** Its workers of the current round all exited 0. */
  done: boolean;
}

/** `node 1 (10.0.0.2 (host-a, pid 7), ranks 2-3)`: how logs and errors name a launcher. */
export function describeLauncher(
  entry: Pick<LauncherEntry, 'name' | 'nproc' | 'nodeRank'>,
  rankOffset?: number,
): string {
  if (entry.nodeRank === undefined || rankOffset === undefined) return entry.name;
  return `node ${entry.nodeRank} (${entry.name}, ${describeRanks(rankOffset, entry.nproc)})`;
}
