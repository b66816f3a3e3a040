import { constants } from 'node:os';
import { generateJobSecret, resolveJobSecret } from '../auth/job-secret.js';
import { CollectiveError } from '../errors.js';
import { connectStore, type StoreClient } from '../store/store-client.js';
import { type StoreServer, startStoreServer } from '../store/store-server.js';
import { JobCoordinator } from './job-coordinator.js';
import type { LaunchOptions } from './launch-options.js';
import { createMemoryCaps } from './memory-cap.js';
import { type AttemptDirectory, RunDirectory } from './run-directory.js';
import { exitsOf, settleWorkers, startLocalWorkers } from './start-local-workers.js';
import { buildWorkerCommand, checkWorkerScript } from './worker-command.js';
import { buildWorkerEnvironment } from './worker-environment.js';
import { describeExit, type WorkerExit, type WorkerProcess } from './worker-process.js';

type AttemptResult =
  | { kind: 'success' }
  | { kind: 'failed'; message: string; restartable: boolean }
  | { kind: 'interrupted'; signal: NodeJS.Signals };

type AttemptEvent =
  | { kind: 'local-failure'; exit: WorkerExit }
  | { kind: 'local-success' }
  | { kind: 'remote-failure'; message: string }
  | { kind: 'interrupted'; signal: NodeJS.Signals }
  | { kind: 'store-lost'; error: CollectiveError };

/** Signals fsdp-run forwards to its workers before stopping (SIGHUP: the terminal closed). */
const FORWARDED_SIGNALS: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

/** Launchers on nodes other than 0 ping the store this often (or every timeout / 2 if shorter). */
const HEARTBEAT_INTERVAL_MS = 5_000;

/**
 * Runs a whole fsdp-run job on this node and returns the launcher's exit code: 0 when every
 * worker of every node exited 0, 1 on a failure (after --max-restarts), 128 + n when stopped by
 * signal n. Never returns while a worker it started is still running.
 */
export async function runLauncher(
  options: LaunchOptions,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  return new Launcher(options, env).run();
}

class Launcher {
  private workers: WorkerProcess[] = [];
  /** This attempt's failure records ([Note: run directory]). */
  private records: AttemptDirectory | undefined;
  private readonly runDirectory: RunDirectory;
  private interruption: NodeJS.Signals | undefined;
  private readonly interrupted: Promise<NodeJS.Signals>;
  private resolveInterrupted!: (signal: NodeJS.Signals) => void;
  private readonly storeLost: Promise<CollectiveError>;
  private resolveStoreLost!: (error: CollectiveError) => void;
  private readonly gracePeriodMs: number;
  private readonly timeoutMs: number;

  constructor(
    private readonly options: LaunchOptions,
    private readonly env: NodeJS.ProcessEnv,
  ) {
    this.interrupted = new Promise((resolve) => (this.resolveInterrupted = resolve));
    this.storeLost = new Promise((resolve) => (this.resolveStoreLost = resolve));
    this.gracePeriodMs = options.gracePeriodSeconds * 1_000;
    this.timeoutMs = Math.round(options.timeoutSeconds * 1_000);
    this.runDirectory = new RunDirectory(options.logDirectory);
  }

  async run(): Promise<number> {
    const onSignal = (signal: NodeJS.Signals) => this.interrupt(signal);
    for (const signal of FORWARDED_SIGNALS) process.on(signal, onSignal);
    // Each worker waits on at most one 'drain' per stream (see [Note: output backpressure]).
    process.stdout.setMaxListeners(this.options.nprocPerNode + 10);
    process.stderr.setMaxListeners(this.options.nprocPerNode + 10);
    let server: StoreServer | undefined;
    let store: StoreClient | undefined;
    let heartbeat: NodeJS.Timeout | undefined;
    try {
      checkWorkerScript(this.options.script);
      buildWorkerCommand(this.options.script, this.options.scriptArguments);
      // Fail before any rendezvous when the caps cannot be set (no cgroups, no permission).
      const { nprocPerNode: perNode, nodeRank: node } = this.options;
      const probe = Array.from({ length: perNode }, (_, localRank) => node * perNode + localRank);
      for (const cap of createMemoryCaps(
        this.options.memoryPerRankBytes,
        probe,
        `fsdp-run-${process.pid}-probe`,
      ))
        cap?.remove();
      const secret = this.jobSecret();
      const { masterAddr, nodeRank } = this.options;
      let port = this.options.masterPort;
      if (nodeRank === 0) {
        server = await startStoreServer({ host: masterAddr, port, secret });
        port = server.port;
      }
      if (nodeRank !== 0) this.log(`joining the store of node 0 at ${masterAddr}:${port}.`);
      store = await this.unlessInterrupted(
        connectStore({ host: masterAddr, port, secret, timeoutMs: this.timeoutMs }),
        `connecting to the store at ${masterAddr}:${port}`,
      );
      store.onConnectionLost((error) => this.resolveStoreLost(error));
      if (nodeRank !== 0) heartbeat = this.startHeartbeat(store);
      const coordinator = new JobCoordinator(
        store,
        nodeRank,
        this.options.nnodes,
        this.timeoutMs,
        this.options.nprocPerNode,
      );
      await coordinator.arm();
      const exitCode = await this.runAttempts(coordinator, secret, port);
      await coordinator.finish().catch(() => {});
      return exitCode;
    } catch (error) {
      this.log(`error: ${error instanceof Error ? error.message : String(error)}`);
      return this.interruption === undefined ? 1 : exitCodeOf(this.interruption);
    } finally {
      clearInterval(heartbeat);
      await this.stopWorkers();
      await store?.close();
      await server?.close();
      this.runDirectory.close();
      for (const signal of FORWARDED_SIGNALS) process.off(signal, onSignal);
    }
  }

  /** `promise`, unless a signal comes first: then a CollectiveError saying what was interrupted. */
  private unlessInterrupted<T>(promise: Promise<T>, what: string): Promise<T> {
    return Promise.race([
      promise,
      this.interrupted.then((signal): never => {
        throw new CollectiveError(`Interrupted by ${signal} while ${what}.`, { code: 'launch' });
      }),
    ]);
  }

  private async runAttempts(coordinator: JobCoordinator, secret: string, port: number): Promise<number> {
    for (let attempt = 0; ; attempt++) {
      const result = await this.runAttempt(coordinator, attempt, secret, port);
      await coordinator.leave(attempt).catch(() => {});
      if (result.kind === 'success') return 0;
      if (result.kind === 'interrupted') {
        this.log(`stopped by ${result.signal}; every worker has exited.`);
        return exitCodeOf(result.signal);
      }
      if (result.restartable && attempt < this.options.maxRestarts) {
        this.log(
          `attempt ${attempt} failed: ${result.message}; restarting the group (restart ${attempt + 1} of ${this.options.maxRestarts}).`,
        );
        continue;
      }
      this.log(`job failed: ${result.message}`);
      return 1;
    }
  }

  private async runAttempt(
    coordinator: JobCoordinator,
    attempt: number,
    secret: string,
    port: number,
  ): Promise<AttemptResult> {
    const joined = await this.race(coordinator.join(attempt).then(() => undefined));
    if (joined !== undefined) return this.settle(coordinator, attempt, joined);
    const { nprocPerNode, nodeRank } = this.options;
    const records = this.runDirectory.attempt(`attempt-${attempt}`);
    this.records = records;
    this.workers = startLocalWorkers({
      records,
      count: nprocPerNode,
      firstRank: nodeRank * nprocPerNode,
      memoryPerRankBytes: this.options.memoryPerRankBytes,
      cgroupLabel: `fsdp-run-${process.pid}-attempt-${attempt}`,
      environmentOf: (rank, localRank) =>
        buildWorkerEnvironment(this.options, this.env, {
          rank,
          localRank,
          attempt,
          secret,
          port,
          timeoutMs: this.timeoutMs,
        }),
      log: (message) => this.log(message),
    });
    const exits = this.workers.map((worker) => worker.exited);
    const localFailure = new Promise<AttemptEvent>((resolve) => {
      for (const exited of exits) {
        exited.then((exit) => {
          if (exit.code !== 0) resolve({ kind: 'local-failure', exit });
        });
      }
    });
    const localSuccess = Promise.all(exits).then((all) =>
      all.every((exit) => exit.code === 0) ? { kind: 'local-success' as const } : localFailure,
    );
    const remote = this.remoteFailure(coordinator, attempt);
    const event: AttemptEvent = await this.race(Promise.race([localFailure, localSuccess, remote]));
    if (event.kind !== 'local-success') return this.settle(coordinator, attempt, event);
    const everyNode = await this.race(
      Promise.race([coordinator.done(attempt).then(() => undefined), remote]),
    );
    return everyNode === undefined ? { kind: 'success' } : this.settle(coordinator, attempt, everyNode);
  }

  /** Turns a non-success event into the attempt's result, stopping this node's workers. */
  private async settle(
    coordinator: JobCoordinator,
    attempt: number,
    event: AttemptEvent,
  ): Promise<AttemptResult> {
    const node = `node ${this.options.nodeRank}`;
    switch (event.kind) {
      case 'local-failure': {
        const message = `${describeExit(event.exit)} on ${node}`;
        this.log(`${message}; stopping the other workers.`);
        const standing = await coordinator.reportFailure(attempt, message).catch(() => message);
        await settleWorkers(this.workers);
        const [, stopped] = await Promise.all([this.stopWorkers(), coordinator.stopped().catch(() => true)]);
        await this.reportFailures();
        return { kind: 'failed', message: standing, restartable: !stopped };
      }
      case 'remote-failure': {
        this.log(`another node failed (${event.message}); stopping the workers of ${node}.`);
        const [, stopped] = await Promise.all([this.stopWorkers(), coordinator.stopped().catch(() => true)]);
        await this.reportFailures();
        return { kind: 'failed', message: event.message, restartable: !stopped };
      }
      case 'interrupted':
        await coordinator.reportStop(attempt, `fsdp-run on ${node} received ${event.signal}`).catch(() => {});
        await this.stopWorkers(event.signal);
        return { kind: 'interrupted', signal: event.signal };
      case 'store-lost':
        this.log(`${event.error.message} Stopping the workers of ${node}.`);
        await this.stopWorkers();
        await this.reportFailures();
        return {
          kind: 'failed',
          message: `lost the store on node 0 at ${this.options.masterAddr}:${this.options.masterPort}`,
          restartable: false,
        };
      case 'local-success':
        return { kind: 'success' };
    }
  }

  /** Waits for `promise`, or for an interruption or a lost store, whichever comes first. */
  private race<T extends AttemptEvent | undefined>(promise: Promise<T>): Promise<T | AttemptEvent> {
    return Promise.race([
      promise,
      this.interrupted.then((signal): AttemptEvent => ({ kind: 'interrupted', signal })),
      this.storeLost.then((error): AttemptEvent => ({ kind: 'store-lost', error })),
    ]).catch((error: unknown) => {
      if (error instanceof CollectiveError && (error.code === 'store' || error.code === 'closed')) {
        return { kind: 'store-lost', error } as AttemptEvent;
      }
      throw error;
    });
  }

  private remoteFailure(coordinator: JobCoordinator, attempt: number): Promise<AttemptEvent> {
    return coordinator.failure(attempt).then(
      (message): AttemptEvent => ({ kind: 'remote-failure', message }),
      // A closed or lost store surfaces through `storeLost`; this watcher just ends.
      () => new Promise<AttemptEvent>(() => {}),
    );
  }

  private interrupt(signal: NodeJS.Signals): void {
    if (this.interruption !== undefined) {
      this.log(`second ${signal}: killing every worker now.`);
      for (const worker of this.workers) worker.signal('SIGKILL');
      return;
    }
    this.interruption = signal;
    this.log(`received ${signal}; forwarding it to the workers.`);
    for (const worker of this.workers) void worker.stop(this.gracePeriodMs, signal);
    this.resolveInterrupted(signal);
  }

  /** Prints this attempt's failure report ([Note: one report per job]); call once its workers have exited. */
  private async reportFailures(): Promise<void> {
    const records = this.records;
    if (records === undefined) return;
    this.records = undefined;
    for (const line of records.report(await exitsOf(this.workers), this.env.FSDP_DEBUG === '1'))
      this.log(line);
  }

  private async stopWorkers(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    await Promise.all(this.workers.map((worker) => worker.stop(this.gracePeriodMs, signal)));
  }

  private startHeartbeat(store: StoreClient): NodeJS.Timeout {
    const timer = setInterval(
      () => {
        store.ping(this.timeoutMs).catch((error: unknown) => {
          if (!(error instanceof CollectiveError) || error.code !== 'timeout') return;
          this.resolveStoreLost(error);
          // Fail every later request at once instead of waiting on a store that does not answer.
          void store.close();
        });
      },
      Math.min(HEARTBEAT_INTERVAL_MS, this.timeoutMs / 2),
    );
    timer.unref();
    return timer;
  }

  private jobSecret(): string {
    const secret = resolveJobSecret(this.env);
    if (secret !== undefined) return secret;
    if (this.options.nnodes > 1) {
      throw new CollectiveError('A multi-node job needs a job secret shared by every node.', {
        code: 'auth',
        fix: 'set FSDP_JOB_SECRET (e.g. `export FSDP_JOB_SECRET=$(openssl rand -hex 32)` before srun) or FSDP_JOB_SECRET_FILE on every node.',
      });
    }
    return generateJobSecret();
  }

  private log(message: string): void {
    const who = this.options.nnodes > 1 ? `fsdp-run[node ${this.options.nodeRank}]` : 'fsdp-run';
    process.stderr.write(`${who}: ${message}\n`);
  }
}

function exitCodeOf(signal: NodeJS.Signals): number {
  return 128 + (constants.signals[signal] ?? 15);
}
