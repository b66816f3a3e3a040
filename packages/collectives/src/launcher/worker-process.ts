import { type ChildProcess, spawn } from 'node:child_process';
import { LinePrefixer } from './line-prefixer.js';
import { formatBytes, type MemoryCgroup } from './memory-cap.js';

/** How a worker ended: an exit code, or the signal that killed it. */
export interface WorkerExit {
  rank: number;
  localRank: number;
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Whether fsdp-run had asked it to stop (`stop`) before it exited. */
  stopped?: boolean;
  /** With --memory-per-rank: the cap, the cgroup's peak usage, and whether the OOM killer struck. */
  memory?: { capBytes: number; peakBytes: number | undefined; outOfMemory: boolean };
}

export interface WorkerSpawnOptions {
  rank: number;
  localRank: number;
  nodeArguments: string[];
  env: NodeJS.ProcessEnv;
  /** The worker's own memory cgroup (--memory-per-rank); the worker owns it from here on. */
  memoryCap?: MemoryCgroup;
  /** Where prefixed output goes (process.stdout / process.stderr by default). */
  stdout?: NodeJS.WritableStream;
  stderr?: NodeJS.WritableStream;
}

/** 'worker rank 1 exited with code 3' / '... was killed by signal SIGKILL'. */
/** With --memory-per-rank: one line per worker when it exits, its peak memory against its cap. */
export function logPeakMemory(workers: readonly WorkerProcess[], log: (message: string) => void): void {
  for (const worker of workers) {
    void worker.exited.then(({ rank, memory }) => {
      if (memory === undefined) return;
      const peak = memory.peakBytes === undefined ? 'unknown' : formatBytes(memory.peakBytes);
      const outcome = memory.outOfMemory ? ' (killed: out of memory)' : '';
      log(`rank ${rank} peak memory ${peak} of its ${formatBytes(memory.capBytes)} cap${outcome}.`);
    });
  }
}

export function describeExit(exit: WorkerExit): string {
  return `rank ${exit.rank} (local rank ${exit.localRank}) ${describeEnding(exit)}`;
}

/** 'exited with code 3' / 'was killed by signal SIGKILL' / '... by the out-of-memory killer ...'. */
export function describeEnding(exit: WorkerExit): string {
  return exit.memory?.outOfMemory === true
    ? `was killed by the out-of-memory killer at its --memory-per-rank cap of ${formatBytes(exit.memory.capBytes)}`
    : exit.signal !== null
      ? `was killed by signal ${exit.signal}`
      : `exited with code ${exit.code}`;
}

/**
 * One worker process. State: 'running' until it exits ('exited'); `stop` moves it through
 * 'stopping' (SIGTERM sent, SIGKILL after the grace period). The worker runs in its own process
 * group (detached) so a terminal's Ctrl-C reaches it once, through the launcher, and signals
 * reach the processes it started too.
 */
export class WorkerProcess {
  private state: 'running' | 'stopping' | 'exited' = 'running';
  private readonly child: ChildProcess;
  /** Resolves when the process has exited and its output is flushed. */
  readonly exited: Promise<WorkerExit>;

  constructor(readonly options: WorkerSpawnOptions) {
    const command = options.memoryCap?.wrap(process.execPath, options.nodeArguments) ?? {
      command: process.execPath,
      arguments: options.nodeArguments,
    };
    this.child = spawn(command.command, command.arguments, {
      env: options.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    const prefix = `[rank ${options.rank}] `;
    const stdout = forward(this.child.stdout!, options.stdout ?? process.stdout, prefix);
    const stderr = forward(this.child.stderr!, options.stderr ?? process.stderr, prefix);
    this.exited = new Promise((resolve) => {
      let exit: WorkerExit | undefined;
      const finish = () => {
        if (exit === undefined) return;
        stdout.flush();
        stderr.flush();
        resolve(exit);
      };
      this.child.once('error', (error) => {
        process.stderr.write(`fsdp-run: cannot start rank ${options.rank}: ${error.message}\n`);
        exit = { rank: options.rank, localRank: options.localRank, code: 127, signal: null };
        this.state = 'exited';
        finish();
      });
      this.child.once('exit', (code, signal) => {
        exit = {
          rank: options.rank,
          localRank: options.localRank,
          code,
          signal,
          stopped: this.state === 'stopping',
        };
        this.state = 'exited';
        this.killLeftovers();
        const cap = options.memoryCap;
        if (cap !== undefined) {
          exit.memory = {
            capBytes: cap.limitBytes,
            peakBytes: cap.peakBytes(),
            outOfMemory: signal === 'SIGKILL' && cap.outOfMemoryKills() > 0,
          };
          cap.remove();
        }
        // [Note: output flush] 'close' follows once both pipes are drained; a grandchild that
        // keeps them open must not hold the launcher, so wait at most one second.
        const timer = setTimeout(finish, 1_000);
        this.child.once('close', () => {
          clearTimeout(timer);
          finish();
        });
        if (this.child.stdout!.closed && this.child.stderr!.closed) finish();
      });
    });
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get rank(): number {
    return this.options.rank;
  }

  get running(): boolean {
    return this.state !== 'exited';
  }

  /** Sends `signal` to the worker's process group (a forwarded SIGINT or SIGTERM). */
  signal(signal: NodeJS.Signals): void {
    if (this.state === 'exited' || this.child.pid === undefined) return;
    try {
      process.kill(-this.child.pid, signal);
    } catch {
      // Already gone: the 'exit' event is on its way.
    }
  }

  /**
   * [Note: leftover processes] Processes a worker started and left running when it exited are
   * still in its process group: SIGKILL them at once, so none outlives fsdp-run. Done right at
   * the exit, while no new process can have reused the worker's pid as its group id (and a
   * group that still has members keeps its id reserved).
   */
  private killLeftovers(): void {
    if (this.child.pid === undefined) return;
    try {
      process.kill(-this.child.pid, 'SIGKILL');
    } catch {
      // ESRCH: the group is empty, nothing was left behind.
    }
  }

  /** SIGTERM (or `signal`), then SIGKILL after `gracePeriodMs`; resolves when it has exited. */
  async stop(gracePeriodMs: number, signal: NodeJS.Signals = 'SIGTERM'): Promise<WorkerExit> {
    if (this.state === 'running') {
      this.state = 'stopping';
      this.signal(signal);
      const timer = setTimeout(() => {
        if (this.child.pid !== undefined && this.child.exitCode === null && this.child.signalCode === null) {
          try {
            process.kill(-this.child.pid, 'SIGKILL');
          } catch {}
        }
      }, gracePeriodMs);
      const exit = await this.exited;
      clearTimeout(timer);
      return exit;
    }
    return this.exited;
  }
}

/**
 * Pipes a worker's output stream into `target`, line-prefixed. [Note: output backpressure]
 * When `target` is a slow pipe (`fsdp-run … | tee log`) and its buffer is full, the worker's
 * stream is paused until it drains, so the launcher never holds unbounded output in memory;
 * the worker then blocks on its own full pipe, as it would without a launcher.
 */
function forward(source: NodeJS.ReadableStream, target: NodeJS.WritableStream, prefix: string): LinePrefixer {
  const prefixer = new LinePrefixer(prefix, (lines) => {
    if (!target.write(lines)) {
      source.pause();
      target.once('drain', () => source.resume());
    }
  });
  source.on('data', (chunk: Buffer) => prefixer.push(chunk));
  return prefixer;
}
