import type { NativeSockets } from './native-sockets.js';

/**
 * [Note: native profile] `FSDP_TCP_PROFILE=1`: the communication worker adds up, per phase of its
 * ops on the native data path, wall time, this thread's CPU time (clock_gettime with
 * CLOCK_THREAD_CPUTIME_ID through koffi) and calls, plus the bytes node:net read on every link,
 * and prints the totals per op to stderr when the engine closes (`bench/tcp-profile-rank.ts` runs it).
 * A diagnostic: off, it costs one undefined check per phase.
 */
export type ProfilePhase =
  | 'op'
  | 'header exchange'
  | 'header send'
  | 'header recv'
  | 'header poll wait'
  | 'mismatch (node:net)'
  | 'flush before native'
  | 'slice yield'
  | 'poll wait'
  | 'poll check'
  | 'send'
  | 'recv'
  | 'process (reduce, copy, forward)';

interface PhaseTotal {
  ms: number;
  cpuMs: number;
  calls: number;
  bytes: number;
}

export interface Mark {
  wall: number;
  cpu: number;
}

export class NativeProfile {
  private readonly phases = new Map<ProfilePhase, PhaseTotal>();
  private ops = 0;
  private cpuMs = 0;
  private opCpuStart = 0;
  private readonly cpuClock: () => number;
  /** Bytes and chunks node:net delivered on every link of this thread. */
  private readonly nodeNetBytes = { count: 0, calls: 0 };

  constructor(sockets: NativeSockets) {
    this.cpuClock = () => sockets.threadCpuMs();
  }

  /** Wall and thread CPU time now, for `add`. */
  mark(): Mark {
    return { wall: performance.now(), cpu: this.cpuClock() };
  }

  /** One call of `phase`, from `start` to now. */
  add(phase: ProfilePhase, start: Mark, bytes = 0): void {
    const ms = performance.now() - start.wall;
    const cpuMs = this.cpuClock() - start.cpu;
    const total = this.phases.get(phase);
    if (total === undefined) this.phases.set(phase, { ms, cpuMs, calls: 1, bytes });
    else {
      total.ms += ms;
      total.cpuMs += cpuMs;
      total.calls++;
      total.bytes += bytes;
    }
  }

  /** One chunk of `bytes` delivered by node:net on some link. */
  nodeNetRead(bytes: number): void {
    this.nodeNetBytes.count += bytes;
    this.nodeNetBytes.calls++;
  }

  opStarted(): void {
    this.opCpuStart = this.cpuClock();
  }

  opEnded(): void {
    this.ops++;
    this.cpuMs += this.cpuClock() - this.opCpuStart;
  }

  /** Per-op totals, one line per phase. */
  report(rank: number): string {
    const ops = Math.max(1, this.ops);
    const nodeNetRead = this.nodeNetBytes;
    const lines = [
      `[tcp profile rank ${rank}] ${this.ops} ops, worker thread CPU ${(this.cpuMs / ops).toFixed(2)} ms/op, node:net read ${(nodeNetRead.count / ops / 1024).toFixed(0)} KiB/op in ${(nodeNetRead.calls / ops).toFixed(1)} chunks/op`,
    ];
    for (const [phase, total] of this.phases)
      lines.push(
        `  ${phase.padEnd(34)}${(total.ms / ops).toFixed(2).padStart(9)} ms/op wall ${(total.cpuMs / ops).toFixed(2).padStart(7)} ms/op CPU ${(total.calls / ops).toFixed(1).padStart(9)} calls/op${total.bytes > 0 ? ` ${(total.bytes / total.calls / 1024).toFixed(1)} KiB/call` : ''}`,
      );
    return lines.join('\n');
  }
}

/** The worker's profile when FSDP_TCP_PROFILE=1 and the native path loaded, else undefined. */
export function nativeProfile(sockets: NativeSockets | undefined): NativeProfile | undefined {
  if (process.env.FSDP_TCP_PROFILE !== '1' || sockets === undefined) return undefined;
  return new NativeProfile(sockets);
}
