import { writeSync } from 'node:fs';

/**
 * [Note: shm profile] `FSDP_SHM_PROFILE=1`: the shm engine adds up the wall time of each phase of
 * every op too large for the mailbox, per kind of op (in place or not), and writes the totals
 * per op to stderr when the engine closes (`bench/shm-profile.ts` runs it). The phases follow
 * `ShmEngine.collective`: posting the header and buffers and ringing the doorbells, waiting until
 * every peer's header is in, taking their buffers off the ports, the data work, and waiting
 * until every peer has finished. What the main thread sees on top (the hand-off to the worker
 * and the wake-up when the op's status is set) is the op's time minus the sum of these.
 * A diagnostic: off, it costs one undefined check per phase.
 */
export type ShmPhase = 'post' | 'wait for headers' | 'receive buffers' | 'data' | 'wait for finish';

interface KindTotal {
  ops: number;
  phases: Map<ShmPhase, number>;
}

export class ShmProfile {
  private readonly kinds = new Map<string, KindTotal>();

  /** Adds the time from `start` to now to `phase` of `kind`; returns now (the next phase's start). */
  add(kind: string, phase: ShmPhase, start: number): number {
    const now = performance.now();
    const total = this.total(kind);
    total.phases.set(phase, (total.phases.get(phase) ?? 0) + now - start);
    return now;
  }

  opEnded(kind: string): void {
    this.total(kind).ops++;
  }

  /** Writes the per-op totals to stderr, one line per kind and phase. */
  write(rank: number): void {
    const lines: string[] = [];
    for (const [kind, total] of this.kinds) {
      const ops = Math.max(1, total.ops);
      const sum = [...total.phases.values()].reduce((a, b) => a + b, 0);
      lines.push(
        `[shm profile rank ${rank}] ${kind}: ${total.ops} ops, ${(sum / ops).toFixed(3)} ms/op in the worker`,
      );
      for (const [phase, ms] of total.phases)
        lines.push(`  ${phase.padEnd(18)}${(ms / ops).toFixed(3).padStart(8)} ms/op`);
    }
    if (lines.length > 0) writeSync(2, `${lines.join('\n')}\n`);
  }

  private total(kind: string): KindTotal {
    let total = this.kinds.get(kind);
    if (total === undefined) {
      total = { ops: 0, phases: new Map() };
      this.kinds.set(kind, total);
    }
    return total;
  }
}

/** The engine's profile when FSDP_SHM_PROFILE=1, else undefined. */
export function shmProfile(): ShmProfile | undefined {
  return process.env.FSDP_SHM_PROFILE === '1' ? new ShmProfile() : undefined;
}
