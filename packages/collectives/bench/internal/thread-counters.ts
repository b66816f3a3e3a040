import { readdirSync, readFileSync } from 'node:fs';

/** One thread's counters from /proc/self/task/<tid>: CPU (user + system) and context switches. */
export interface ThreadCounters {
  tid: number;
  cpuMs: number;
  voluntary: number;
  involuntary: number;
}

const TICK_MS = 10; // USER_HZ is 100 on Linux

/** Every thread of this process, now (Linux; empty elsewhere). */
export function readThreadCounters(): ThreadCounters[] {
  let tids: string[];
  try {
    tids = readdirSync('/proc/self/task');
  } catch {
    return [];
  }
  const threads: ThreadCounters[] = [];
  for (const tid of tids) {
    try {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
      // Fields after the command name (which may hold spaces) start after the last ')'.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const cpuMs = (Number(fields[11]) + Number(fields[12])) * TICK_MS;
      const status = readFileSync(`/proc/self/task/${tid}/status`, 'utf8');
      threads.push({
        tid: Number(tid),
        cpuMs,
        voluntary: Number(/voluntary_ctxt_switches:\s+(\d+)/.exec(status)?.[1] ?? 0),
        involuntary: Number(/nonvoluntary_ctxt_switches:\s+(\d+)/.exec(status)?.[1] ?? 0),
      });
    } catch {
      // The thread ended between the listing and the read.
    }
  }
  return threads;
}

/**
 * Per-op deltas between two snapshots, by role: the main thread (tid = pid), the busiest other
 * thread (the communication worker, in a collectives rank) and every other thread together.
 */
export function perOpByRole(
  before: ThreadCounters[],
  after: ThreadCounters[],
  ops: number,
): Record<'main' | 'busiest' | 'others', { cpuMs: number; voluntary: number; involuntary: number }> {
  const start = new Map(before.map((thread) => [thread.tid, thread]));
  const deltas = after.map((thread) => {
    const from = start.get(thread.tid) ?? { cpuMs: 0, voluntary: 0, involuntary: 0 };
    return {
      tid: thread.tid,
      cpuMs: thread.cpuMs - from.cpuMs,
      voluntary: thread.voluntary - from.voluntary,
      involuntary: thread.involuntary - from.involuntary,
    };
  });
  const main = deltas.find((delta) => delta.tid === process.pid)!;
  const rest = deltas.filter((delta) => delta.tid !== process.pid);
  rest.sort((a, b) => b.voluntary + b.cpuMs - (a.voluntary + a.cpuMs));
  const busiest = rest[0] ?? { cpuMs: 0, voluntary: 0, involuntary: 0 };
  const others = rest.slice(1).reduce(
    (sum, delta) => ({
      cpuMs: sum.cpuMs + delta.cpuMs,
      voluntary: sum.voluntary + delta.voluntary,
      involuntary: sum.involuntary + delta.involuntary,
    }),
    { cpuMs: 0, voluntary: 0, involuntary: 0 },
  );
  const per = (counts: { cpuMs: number; voluntary: number; involuntary: number }) => ({
    cpuMs: counts.cpuMs / ops,
    voluntary: counts.voluntary / ops,
    involuntary: counts.involuntary / ops,
  });
  return { main: per(main), busiest: per(busiest), others: per(others) };
}
