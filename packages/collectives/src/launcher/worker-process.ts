import { type ChildProcess, spawn } from 'node:child_process';
import { constants } from 'node:os';
import { type AttemptDirectory, RunDirectory } from './failure-report.js';
import type { LaunchOptions } from './launch-options.js';
import { createMemoryCaps, formatBytes, type MemoryCgroup } from './memory-cap.js';
import { buildWorkerCommand, checkWorkerScript } from './worker-command.js';

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

interface WorkerSpawnOptions {
  rank: number;
  localRank: number;
  nodeArguments: string[];
  env: NodeJS.ProcessEnv;
  /** The worker's own memory cgroup (--memory-per-rank); the worker owns it from here on. */
  memoryCap?: MemoryCgroup;
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
class WorkerProcess {
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
    const stdout = forward(this.child.stdout!, process.stdout, prefix);
    const stderr = forward(this.child.stderr!, process.stderr, prefix);
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
        // [Note: leftover processes] What the worker left running is still in its process group:
        // SIGKILL it now, while no new process can have reused the pid as its group id.
        this.signalGroup('SIGKILL');
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
    if (this.state !== 'exited') this.signalGroup(signal);
  }

  /** `signal` to the worker's process group; ESRCH (the group is empty) is ignored. */
  private signalGroup(signal: NodeJS.Signals): void {
    if (this.child.pid === undefined) return;
    try {
      process.kill(-this.child.pid, signal);
    } catch {}
  }

  /** SIGTERM (or `signal`), then SIGKILL after `gracePeriodMs`; resolves when it has exited. */
  async stop(gracePeriodMs: number, signal: NodeJS.Signals = 'SIGTERM'): Promise<WorkerExit> {
    if (this.state === 'running') {
      this.state = 'stopping';
      this.signal(signal);
      const timer = setTimeout(() => {
        if (this.child.exitCode === null && this.child.signalCode === null) this.signalGroup('SIGKILL');
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

/** Longest partial line held back waiting for its newline; beyond it the text is emitted as a line. */
const MAX_HELD_BYTES = 1024 * 1024;
const NEWLINE = 0x0a;

/**
 * Prefixes every line of a byte stream (`[rank 1] ...`) and hands whole lines to `write`, one
 * call per received chunk, so lines of different workers interleave but never split.
 * Bytes after the last newline wait for the next chunk (or `flush`), up to 1 MiB.
 */
export class LinePrefixer {
  private held: Buffer = Buffer.alloc(0);
  private readonly prefix: Buffer;

  constructor(
    prefix: string,
    private readonly write: (lines: Buffer) => void,
  ) {
    this.prefix = Buffer.from(prefix, 'utf8');
  }

  push(chunk: Buffer): void {
    const data = this.held.length === 0 ? chunk : Buffer.concat([this.held, chunk]);
    const parts: Buffer[] = [];
    let start = 0;
    for (let end = data.indexOf(NEWLINE); end !== -1; end = data.indexOf(NEWLINE, start)) {
      parts.push(this.prefix, data.subarray(start, end + 1));
      start = end + 1;
    }
    this.held = Buffer.from(data.subarray(start));
    if (this.held.length > MAX_HELD_BYTES) {
      parts.push(this.prefix, this.held, Buffer.of(NEWLINE));
      this.held = Buffer.alloc(0);
    }
    if (parts.length > 0) this.write(Buffer.concat(parts));
  }

  /** Emits a final line without newline, if any. */
  flush(): void {
    if (this.held.length === 0) return;
    this.write(Buffer.concat([this.prefix, this.held, Buffer.of(NEWLINE)]));
    this.held = Buffer.alloc(0);
  }
}

/**
 * [Note: failure settle] After the first worker of an attempt fails, fsdp-run gives the others
 * up to this long to end on their own before it stops them, so that ranks failing at the same
 * step (or as a consequence, within milliseconds) each record their own failure for the report
 * ([Note: one report per job]) instead of being cut short by SIGTERM.
 */
const FAILURE_SETTLE_MS = 1_000;

/** Signals fsdp-run forwards to its workers before stopping (SIGHUP: the terminal closed). */
const FORWARDED_SIGNALS: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

/** The launcher's exit code after signal `signal`: 128 + its number. */
export function exitCodeOf(signal: NodeJS.Signals): number {
  return 128 + (constants.signals[signal] ?? 15);
}

/** How this node's workers of one attempt or round ended: all exited 0, or the first that did not. */
export type LocalOutcome = { kind: 'success' } | { kind: 'failure'; exit: WorkerExit };

/**
 * This host's workers of the current attempt (fixed-size jobs) or round (elastic jobs), owned
 * by one launcher, the fixed-size one or the elastic agent alike: checks what would fail every
 * rank before any rendezvous, starts the workers in a fresh records directory, each in its own
 * memory cgroup when capped ([Note: per-rank memory caps]), stops them, and prints the
 * attempt's failure report once ([Note: one report per job]).
 */
export class LocalWorkers {
  workers: WorkerProcess[] = [];
  private records: AttemptDirectory | undefined;
  private readonly runDirectory: RunDirectory;
  private readonly gracePeriodMs: number;
  private readonly debug: boolean;
  /** The first forwarded signal fsdp-run received, if any. */
  interruption: NodeJS.Signals | undefined;
  private resolveInterrupted!: (signal: NodeJS.Signals) => void;
  /** Resolves with the first forwarded signal. */
  readonly interrupted = new Promise<NodeJS.Signals>((resolve) => (this.resolveInterrupted = resolve));

  constructor(
    private readonly options: LaunchOptions,
    env: NodeJS.ProcessEnv,
    private readonly log: (message: string) => void,
  ) {
    this.runDirectory = new RunDirectory(options.logDirectory);
    this.gracePeriodMs = options.gracePeriodSeconds * 1_000;
    this.debug = env.FSDP_DEBUG === '1';
  }

  /**
   * Before any rendezvous: fails when the script cannot run (checked in full with `checkScript`)
   * or the caps of `ranks` cannot be set (no cgroups, no permission), so no rank fails with its
   * own copy of the error.
   */
  check(ranks: readonly number[], checkScript: boolean): void {
    // Each worker waits on at most one 'drain' per stream (see [Note: output backpressure]).
    process.stdout.setMaxListeners(this.options.nprocPerNode + 10);
    process.stderr.setMaxListeners(this.options.nprocPerNode + 10);
    if (checkScript) checkWorkerScript(this.options.script);
    buildWorkerCommand(this.options.script, this.options.scriptArguments);
    const { memoryPerRankBytes } = this.options;
    for (const cap of createMemoryCaps(memoryPerRankBytes, ranks, `fsdp-run-${process.pid}-probe`))
      cap.remove();
  }

  /**
   * Starts the workers of attempt or round `label` (`attempt-0`, `round-2`), local rank i as rank
   * `firstRank + i`, every cgroup made before any worker starts, with FSDP_MEMORY_LIMIT_BYTES
   * telling a capped worker its cap; each capped worker logs its peak memory at exit. Resolves
   * with the first non-zero exit, or success once all exited 0.
   */
  start(
    label: string,
    firstRank: number,
    environmentOf: (rank: number, localRank: number) => { env: NodeJS.ProcessEnv; nodeArguments: string[] },
  ): Promise<LocalOutcome> {
    const records = this.runDirectory.attempt(label);
    this.records = records;
    const ranks = Array.from({ length: this.options.nprocPerNode }, (_, localRank) => firstRank + localRank);
    const caps = createMemoryCaps(this.options.memoryPerRankBytes, ranks, `fsdp-run-${process.pid}-${label}`);
    this.workers = ranks.map((rank, localRank) => {
      const { env, nodeArguments } = environmentOf(rank, localRank);
      Object.assign(env, records.environmentOf(rank));
      const memoryCap = caps[localRank];
      if (memoryCap !== undefined) env.FSDP_MEMORY_LIMIT_BYTES = String(memoryCap.limitBytes);
      const worker = new WorkerProcess({
        rank,
        localRank,
        nodeArguments,
        env,
        ...(memoryCap && { memoryCap }),
      });
      void worker.exited.then(({ memory }) => {
        if (memory === undefined) return;
        const peak = memory.peakBytes === undefined ? 'unknown' : formatBytes(memory.peakBytes);
        const outcome = memory.outOfMemory ? ' (killed: out of memory)' : '';
        this.log(`rank ${rank} peak memory ${peak} of its ${formatBytes(memory.capBytes)} cap${outcome}.`);
      });
      return worker;
    });
    const exits = this.workers.map((worker) => worker.exited);
    return new Promise((resolve) => {
      for (const exited of exits)
        void exited.then((exit) => exit.code !== 0 && resolve({ kind: 'failure', exit }));
      void Promise.all(exits).then(
        (all) => all.every((exit) => exit.code === 0) && resolve({ kind: 'success' }),
      );
    });
  }

  /** Resolves when every worker has exited, or after `withinMs`, whichever is first ([Note: failure settle]). */
  async settle(withinMs = FAILURE_SETTLE_MS): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all(this.workers.map((worker) => worker.exited)),
      new Promise((resolve) => (timer = setTimeout(resolve, withinMs))),
    ]);
    clearTimeout(timer);
  }

  /** Stops every worker: `signal`, then SIGKILL after the grace period. */
  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    await Promise.all(this.workers.map((worker) => worker.stop(this.gracePeriodMs, signal)));
  }

  /** Prints this attempt's failure report ([Note: one report per job]); call once its workers have exited. */
  async reportFailures(): Promise<void> {
    const records = this.records;
    if (records === undefined) return;
    this.records = undefined;
    const exits = await Promise.all(this.workers.map((worker) => worker.exited));
    for (const line of records.report(exits, this.debug)) this.log(line);
  }

  /**
   * Handles FORWARDED_SIGNALS until the returned function is called: the first resolves
   * `interrupted` (and, with `stopAtOnce`, sends it on to the workers at once); a second kills
   * every worker.
   */
  handleSignals(stopAtOnce: boolean): () => void {
    const onSignal = (signal: NodeJS.Signals) => {
      if (this.interruption !== undefined) {
        this.log(`second ${signal}: killing every worker now.`);
        for (const worker of this.workers) worker.signal('SIGKILL');
        return;
      }
      this.interruption = signal;
      this.log(`received ${signal}; forwarding it to the workers.`);
      if (stopAtOnce) void this.stop(signal);
      this.resolveInterrupted(signal);
    };
    for (const signal of FORWARDED_SIGNALS) process.on(signal, onSignal);
    return () => {
      for (const signal of FORWARDED_SIGNALS) process.off(signal, onSignal);
    };
  }

  /** The launcher's exit code after an error: 1, or 128 + n when signal n interrupted it. */
  failureExitCode(): number {
    return this.interruption === undefined ? 1 : exitCodeOf(this.interruption);
  }

  /** Removes the run directory unless a worker wrote a failure record into it. */
  close(): void {
    this.runDirectory.close();
  }
}
