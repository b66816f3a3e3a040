/**
 * The CPU time a whole job spends in one step, every process of it and the kernel's work beside
 * it, as bench/cluster's CPU bound needs (bench/README.md#emulated-cluster). Rank 0 reads the
 * counters at the start and the end of each step; torch-fsdp-training.py reads the same files the
 * same way (`JobCpu` there), so both sides are counted alike.
 *
 *   BENCH_JOB_CPU='{"namespaces": ["/run/netns/a", "/run/netns/b"], "busyPid": 123}'
 *
 * [Note: job CPU accounting]
 * - The job's processes are every process whose network namespace is one of `namespaces` (the
 *   hosts of bench/cluster: the ranks, and for fsdp-ts the fsdp-run launchers), except `busyPid`
 *   (the busy process of the contention cases, which lives in host 0's namespace). They are found
 *   again at each warm-up step (a peer that never synchronises, as PyTorch's singles, may start
 *   late) and kept through the measured ones.
 * - A process's CPU is utime + stime of /proc/<pid>/stat: every thread of it, main, communication
 *   worker, garbage collector helpers, libuv, in clock ticks (10 ms). One step's delta is coarse;
 *   the mean over a row's steps is not (the error of each delta is at most a tick and not biased).
 * - The kernel's network work (veth, tbf, TCP): this kernel accounts softirq time by tick (no
 *   CONFIG_IRQ_TIME_ACCOUNTING), so softirq time that interrupts a job process is already in its
 *   stime, and what runs in ksoftirqd threads is in theirs (counted here as `ksoftirqdMs`). What
 *   interrupts an idle core is in nobody's: `machine.softirqMs` (/proc/stat irq + softirq) counts
 *   all of it, so the kernel time outside the job is ksoftirqd plus at most that softirq, and at
 *   most what the machine was busy with beyond the job, ksoftirqd and the busy process
 *   (`kernelOutsideJobMs` below).
 * - `machine` is /proc/stat's first line over the step: busy (user, nice, system, irq, softirq),
 *   softirq (irq + softirq) and idle (idle + iowait), ms summed over the cores. What it was busy
 *   with beyond the job and the kernel's work (`othersMs`: the busy process, and any other process
 *   on the machine) is CPU the job could not have: the cores available to the job in a step are
 *   the machine's less that share of its wall time.
 */
import { readdirSync, readFileSync, readlinkSync, statSync } from 'node:fs';

export interface JobCpuSample {
  /** utime + stime of the job's processes, summed (ms). */
  jobMs: number;
  /** The same per process kind: 'rank' (a training process), 'launcher' (fsdp-run). */
  byKind: Record<string, number>;
  ksoftirqdMs: number;
  /** The busy process's CPU (0 without one). */
  busyMs: number;
  machine: { busyMs: number; softirqMs: number; idleMs: number };
}

interface Tracked {
  pid: string;
  kind: string;
}

/** fsdp-run's own script (bin/fsdp-run.ts or .js): that process is a launcher, not a rank. */
const isLauncherScript = (argument: string) => /(^|\/)fsdp-run(\.[cm]?[jt]s)?$/.test(argument);

const tickMs = 10; // USER_HZ is 100 on every Linux architecture Node runs on

/** utime + stime of one process in ms; 0 once it has ended. */
function processCpuMs(pid: string): number {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    // fields[0] is field 3 (state): utime is field 14, stime field 15.
    return (Number(fields[11]) + Number(fields[12])) * tickMs;
  } catch {
    return 0;
  }
}

function machineTicks(): { busyMs: number; softirqMs: number; idleMs: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!;
  const [user, nice, system, idle, iowait, irq, softirq] = line.trim().split(/\s+/).slice(1).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  return {
    busyMs: (user + nice + system + irq + softirq) * tickMs,
    softirqMs: (irq + softirq) * tickMs,
    idleMs: (idle + iowait) * tickMs,
  };
}

interface Reading {
  processes: Map<string, number>;
  busy: number;
  ksoftirqd: number;
  machine: { busyMs: number; softirqMs: number; idleMs: number };
}

export class JobCpu {
  readonly #namespaces: Set<string>;
  readonly #busyPid: string | undefined;
  #tracked: Tracked[] | undefined;
  #ksoftirqd: string[] = [];
  #start: Reading | undefined;

  constructor(options: { namespaces: string[]; busyPid?: number }) {
    this.#namespaces = new Set(options.namespaces.map((path) => `net:[${statSync(path).ino}]`));
    this.#busyPid = options.busyPid === undefined ? undefined : String(options.busyPid);
  }

  /** From BENCH_JOB_CPU, or undefined when it is not set. */
  static fromEnvironment(): JobCpu | undefined {
    const text = process.env.BENCH_JOB_CPU;
    return text === undefined || text === '' ? undefined : new JobCpu(JSON.parse(text));
  }

  #discover(): void {
    this.#tracked = [];
    this.#ksoftirqd = [];
    for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
      try {
        const comm = readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
        if (comm.startsWith('ksoftirqd/')) {
          this.#ksoftirqd.push(pid);
          continue;
        }
        if (pid === this.#busyPid || !this.#namespaces.has(readlinkSync(`/proc/${pid}/ns/net`))) continue;
        const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
        this.#tracked.push({ pid, kind: argv.some(isLauncherScript) ? 'launcher' : 'rank' });
      } catch {
        // gone, or a kernel thread without a namespace link
      }
    }
  }

  #read(): Reading {
    if (this.#tracked === undefined) this.#discover();
    return {
      processes: new Map(this.#tracked!.map(({ pid }) => [pid, processCpuMs(pid)])),
      busy: this.#busyPid === undefined ? 0 : processCpuMs(this.#busyPid),
      ksoftirqd: this.#ksoftirqd.reduce((sum, pid) => sum + processCpuMs(pid), 0),
      machine: machineTicks(),
    };
  }

  /** The step starts; `discover`: find the job's processes again (in warm-up steps, while a peer may still be starting). */
  begin(discover = false): void {
    if (discover) this.#tracked = undefined;
    this.#start = this.#read();
  }

  /** The step ended: what every counter moved since begin(). */
  end(): JobCpuSample {
    const start = this.#start!;
    const now = this.#read();
    const byKind: Record<string, number> = {};
    let jobMs = 0;
    for (const { pid, kind } of this.#tracked!) {
      const used = Math.max(0, now.processes.get(pid)! - start.processes.get(pid)!);
      byKind[kind] = (byKind[kind] ?? 0) + used;
      jobMs += used;
    }
    return {
      jobMs,
      byKind,
      ksoftirqdMs: now.ksoftirqd - start.ksoftirqd,
      busyMs: Math.max(0, now.busy - start.busy),
      machine: {
        busyMs: now.machine.busyMs - start.machine.busyMs,
        softirqMs: now.machine.softirqMs - start.machine.softirqMs,
        idleMs: now.machine.idleMs - start.machine.idleMs,
      },
    };
  }
}

const unattributedMs = (sample: JobCpuSample) =>
  Math.max(0, sample.machine.busyMs - sample.jobMs - sample.ksoftirqdMs - sample.busyMs);

/** The kernel's CPU outside the job's processes in one step (see [Note: job CPU accounting]). */
export function kernelOutsideJobMs(sample: JobCpuSample): number {
  return sample.ksoftirqdMs + Math.min(sample.machine.softirqMs, unattributedMs(sample));
}

/**
 * What else the machine ran in one step: the busy process, and every process outside the job (the
 * machine's busy time less the job's, the kernel's and the busy process's): the cores the job did not have.
 */
export function othersMs(sample: JobCpuSample): number {
  const unattributed = unattributedMs(sample);
  return sample.busyMs + unattributed - Math.min(sample.machine.softirqMs, unattributed);
}
