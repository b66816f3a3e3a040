import { generateJobSecret, requireJobSecret, resolveJobSecret } from '../auth/job-secret.js';
import { CollectiveError } from '../errors.js';
import { connectStore, type StoreClient } from '../store/store-client.js';
import { type StoreServer, startStoreServer } from '../store/store-server.js';
import { describeRanks } from './failure-report.js';
import type { LaunchOptions } from './launch-options.js';
import { buildWorkerEnvironment } from './worker-command.js';
import { describeExit, exitCodeOf, type LocalOutcome, LocalWorkers } from './worker-process.js';

type AttemptResult =
  | { kind: 'success' }
  | { kind: 'failed'; message: string; restartable: boolean }
  | { kind: 'interrupted'; signal: NodeJS.Signals };

type AttemptEvent =
  | LocalOutcome
  | { kind: 'remote-failure'; message: string }
  | { kind: 'interrupted'; signal: NodeJS.Signals }
  | { kind: 'store-lost'; error: CollectiveError };

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
  private readonly local: LocalWorkers;
  private readonly storeLost: Promise<CollectiveError>;
  private resolveStoreLost!: (error: CollectiveError) => void;
  private readonly timeoutMs: number;

  constructor(
    private readonly options: LaunchOptions,
    private readonly env: NodeJS.ProcessEnv,
  ) {
    this.storeLost = new Promise((resolve) => (this.resolveStoreLost = resolve));
    this.timeoutMs = Math.round(options.timeoutSeconds * 1_000);
    this.local = new LocalWorkers(options, env, (message) => this.log(message));
  }

  async run(): Promise<number> {
    const unhandleSignals = this.local.handleSignals(true);
    const { masterAddr, nodeRank, nprocPerNode } = this.options;
    let server: StoreServer | undefined;
    let store: StoreClient | undefined;
    try {
      this.local.check(
        Array.from({ length: nprocPerNode }, (_, localRank) => nodeRank * nprocPerNode + localRank),
        true,
      );
      const secret = this.jobSecret();
      let port = this.options.masterPort;
      if (nodeRank === 0) {
        server = await startStoreServer({ host: masterAddr, port, secret });
        port = server.port;
      } else {
        this.log(`joining the store of node 0 at ${masterAddr}:${port}.`);
      }
      store = await this.unlessInterrupted(
        connectStore({ host: masterAddr, port, secret, timeoutMs: this.timeoutMs }),
        `connecting to the store at ${masterAddr}:${port}`,
      );
      store.onConnectionLost((error) => this.resolveStoreLost(error));
      if (nodeRank !== 0)
        store.keepAlive(Math.min(HEARTBEAT_INTERVAL_MS, this.timeoutMs / 2), this.timeoutMs);
      const coordinator = new JobCoordinator(
        store,
        nodeRank,
        this.options.nnodes,
        this.timeoutMs,
        nprocPerNode,
      );
      await coordinator.arm();
      const exitCode = await this.runAttempts(coordinator, secret, port);
      await coordinator.finish().catch(() => {});
      return exitCode;
    } catch (error) {
      this.log(`error: ${error instanceof Error ? error.message : String(error)}`);
      return this.local.failureExitCode();
    } finally {
      await this.local.stop();
      await store?.close();
      await server?.close();
      this.local.close();
      unhandleSignals();
    }
  }

  /** `promise`, unless a signal comes first: then a CollectiveError saying what was interrupted. */
  private unlessInterrupted<T>(promise: Promise<T>, what: string): Promise<T> {
    return Promise.race([
      promise,
      this.local.interrupted.then((signal): never => {
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
    const identity = { attempt, secret, port, timeoutMs: this.timeoutMs };
    const local = this.local.start(`attempt-${attempt}`, nodeRank * nprocPerNode, (rank, localRank) =>
      buildWorkerEnvironment(this.options, this.env, { ...identity, rank, localRank }),
    );
    const remote = coordinator.failure(attempt).then(
      (message): AttemptEvent => ({ kind: 'remote-failure', message }),
      // A closed or lost store surfaces through `storeLost`; this watcher just ends.
      () => new Promise<AttemptEvent>(() => {}),
    );
    const event = await this.race<AttemptEvent>(Promise.race([local, remote]));
    if (event.kind !== 'success') return this.settle(coordinator, attempt, event);
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
    let message: string;
    switch (event.kind) {
      case 'failure': {
        const failure = `${describeExit(event.exit)} on ${node}`;
        this.log(`${failure}; stopping the other workers.`);
        message = await coordinator.reportFailure(attempt, failure).catch(() => failure);
        await this.local.settle();
        break;
      }
      case 'remote-failure':
        this.log(`another node failed (${event.message}); stopping the workers of ${node}.`);
        message = event.message;
        break;
      case 'interrupted':
        await coordinator.reportStop(attempt, `fsdp-run on ${node} received ${event.signal}`).catch(() => {});
        await this.local.stop(event.signal);
        return { kind: 'interrupted', signal: event.signal };
      case 'store-lost': {
        this.log(`${event.error.message} Stopping the workers of ${node}.`);
        await this.local.stop();
        await this.local.reportFailures();
        const { masterAddr, masterPort } = this.options;
        return {
          kind: 'failed',
          message: `lost the store on node 0 at ${masterAddr}:${masterPort}`,
          restartable: false,
        };
      }
      case 'success':
        return { kind: 'success' };
    }
    const [, stopped] = await Promise.all([this.local.stop(), coordinator.stopped().catch(() => true)]);
    await this.local.reportFailures();
    return { kind: 'failed', message, restartable: !stopped };
  }

  /** Waits for `promise`, or for an interruption or a lost store, whichever comes first. */
  private race<T extends AttemptEvent | undefined>(promise: Promise<T>): Promise<T | AttemptEvent> {
    return Promise.race([
      promise,
      this.local.interrupted.then((signal): AttemptEvent => ({ kind: 'interrupted', signal })),
      this.storeLost.then((error): AttemptEvent => ({ kind: 'store-lost', error })),
    ]).catch((error: unknown) => {
      if (error instanceof CollectiveError && (error.code === 'store' || error.code === 'closed')) {
        return { kind: 'store-lost', error } as AttemptEvent;
      }
      throw error;
    });
  }

  private jobSecret(): string {
    if (this.options.nnodes > 1) return requireJobSecret(this.env, 'A multi-node job');
    return resolveJobSecret(this.env) ?? generateJobSecret();
  }

  private log(message: string): void {
    const who = this.options.nnodes > 1 ? `fsdp-run[node ${this.options.nodeRank}]` : 'fsdp-run';
    process.stderr.write(`${who}: ${message}\n`);
  }
}

/**
 * How the launchers of one job agree, through the store on node 0 (keys under `fsdp-run/`):
 *   attempt-A/joined/K   node K is ready to start attempt A (all wait for every node)
 *   attempt-A/failed     the first failure of attempt A, as text; set by the launcher whose
 *                        worker failed, or by the store itself when a launcher's connection
 *                        drops (setOnDisconnect), so a SIGKILLed launcher fails the job too
 *   attempt-A/done/K     every worker of node K exited 0
 *   finished/K           node K has its verdict; node 0 keeps the store up until all have it
 *                        (also set by the store when K's connection drops)
 *   stopped              the job ends without restart: a launcher was interrupted by a signal
 *                        or lost (set on disconnect), so it will not join another attempt
 * [Note: launcher agreement] Every launcher reads the same `failed` key and has the same
 * --max-restarts, so all decide alike whether to restart.
 */
export class JobCoordinator {
  private readonly prefix = 'fsdp-run/';

  constructor(
    private readonly store: StoreClient,
    private readonly nodeRank: number,
    private readonly nnodes: number,
    private readonly timeoutMs: number,
    /** Workers per node: lets the on-disconnect message name the ranks that were lost. */
    private readonly nprocPerNode: number,
  ) {}

  /**
   * What the store records when this launcher's connection drops (killed, crashed, cut off):
   * names the node and its ranks, e.g. `lost the launcher of node 1 (ranks 2-3; ...)`.
   */
  private lostMessage(): string {
    const ranks = describeRanks(this.nodeRank * this.nprocPerNode, this.nprocPerNode);
    return `lost the launcher of node ${this.nodeRank} (${ranks}; its connection to the store closed)`;
  }

  /** Arms the job-level on-disconnect keys of this launcher (call once, before attempt 0). */
  async arm(): Promise<void> {
    const lost = this.lostMessage();
    await this.store.setOnDisconnect(`${this.prefix}stopped`, lost);
    await this.store.setOnDisconnect(`${this.prefix}finished/${this.nodeRank}`, lost);
  }

  /** Records that the job stops for good (no restart), then fails attempt A with `message`. */
  async reportStop(attempt: number, message: string): Promise<void> {
    await this.store.compareSet(`${this.prefix}stopped`, '', message);
    await this.reportFailure(attempt, message);
  }

  /** Whether some launcher stopped the job for good (see reportStop). */
  stopped(): Promise<boolean> {
    return this.store.check([`${this.prefix}stopped`]);
  }

  /** Joins attempt A and waits until every node has; arms the on-disconnect failure. */
  async join(attempt: number): Promise<void> {
    await this.store.setOnDisconnect(this.key(attempt, 'failed'), this.lostMessage());
    await this.store.set(this.key(attempt, `joined/${this.nodeRank}`), '1');
    try {
      await this.store.wait(this.nodeKeys(attempt, 'joined'), { timeoutMs: this.timeoutMs });
    } catch (cause) {
      throw new CollectiveError(
        `Not every node's fsdp-run joined attempt ${attempt} within ${this.timeoutMs} ms.`,
        {
          code: 'launch',
          cause,
          fix: 'start fsdp-run on every node with the same --nnodes, --master-addr, --master-port and job secret.',
        },
      );
    }
  }

  /** Records a failure of attempt A unless one is recorded already; returns the one that stands. */
  async reportFailure(attempt: number, message: string): Promise<string> {
    const stored = await this.store.compareSet(this.key(attempt, 'failed'), '', message);
    return Buffer.from(stored).toString('utf8');
  }

  /** Resolves with the failure message of attempt A whenever one is recorded. */
  async failure(attempt: number): Promise<string> {
    for (;;) {
      try {
        return Buffer.from(
          await this.store.get(this.key(attempt, 'failed'), { timeoutMs: 3_600_000 }),
        ).toString();
      } catch (error) {
        if (!(error instanceof CollectiveError) || error.code !== 'timeout') throw error;
      }
    }
  }

  /** Marks this node's workers of attempt A done and resolves when every node's are. */
  async done(attempt: number): Promise<void> {
    await this.store.set(this.key(attempt, `done/${this.nodeRank}`), '1');
    await this.store.wait(this.nodeKeys(attempt, 'done'), { timeoutMs: 2 ** 31 - 1 - 10_000 });
  }

  /** Disarms the on-disconnect failure of attempt A (the attempt ended with a verdict). */
  async leave(attempt: number): Promise<void> {
    await this.store.clearOnDisconnect(this.key(attempt, 'failed'));
  }

  /** Says this node has its verdict and disarms; on node 0, waits (bounded) until every node has. */
  async finish(): Promise<void> {
    await this.store.set(`${this.prefix}finished/${this.nodeRank}`, '1');
    await this.store.clearOnDisconnect(`${this.prefix}finished/${this.nodeRank}`);
    await this.store.clearOnDisconnect(`${this.prefix}stopped`);
    if (this.nodeRank !== 0) return;
    const keys = Array.from({ length: this.nnodes }, (_, node) => `${this.prefix}finished/${node}`);
    await this.store.wait(keys, { timeoutMs: Math.min(this.timeoutMs, 30_000) }).catch(() => {});
  }

  private key(attempt: number, name: string): string {
    return `${this.prefix}attempt-${attempt}/${name}`;
  }

  private nodeKeys(attempt: number, name: string): string[] {
    return Array.from({ length: this.nnodes }, (_, node) => this.key(attempt, `${name}/${node}`));
  }
}
