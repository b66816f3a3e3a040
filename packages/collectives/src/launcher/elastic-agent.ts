import { lookup } from 'node:dns/promises';
import { rmSync, writeFileSync } from 'node:fs';
import { hostname, networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { requireJobSecret } from '../auth/job-secret.js';
import { RendezvousClient, type RendezvousEvent } from '../elastic/rendezvous-client.js';
import type { RoundAssignment } from '../elastic/rendezvous-messages.js';
import { RendezvousServer } from '../elastic/rendezvous-server.js';
import { RESTART_SIGNAL } from '../elastic/restart-request.js';
import { localAddressRoutingTo } from '../environment/socket-address.js';
import type { CollectiveError } from '../errors.js';
import { type StoreServer, startStoreServer } from '../store/store-server.js';
import { describeRanks } from './failure-report.js';
import type { ElasticOptions, LaunchOptions } from './launch-options.js';
import { buildWorkerEnvironment } from './worker-command.js';
import { describeExit, exitCodeOf, type LocalOutcome, LocalWorkers } from './worker-process.js';

type AgentEvent =
  | { kind: 'server'; event: RendezvousEvent }
  | { kind: 'workers'; round: number; outcome: LocalOutcome }
  | { kind: 'lost'; error: CollectiveError }
  | { kind: 'interrupted'; signal: NodeJS.Signals };

/**
 * `fsdp-run --nnodes MIN:MAX` on one host and returns its exit code. The launcher whose host
 * owns --master-addr (and binds --master-port first) also runs the rendezvous server and the
 * job's Store. Then every launcher is a rendezvous client: it runs its workers for each round it
 * is a member of, stops them when the round stops, and joins the next one (see [Note: rounds]).
 */
export async function runElasticLauncher(
  options: LaunchOptions,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  return new ElasticAgent(options, options.elastic!, env).run();
}

class ElasticAgent {
  private readonly local: LocalWorkers;
  private round: RoundAssignment | undefined;
  private restartFile: string | undefined;
  private pendingServerEvent: Promise<AgentEvent> | undefined;
  private workersOutcome: Promise<AgentEvent> | undefined;

  constructor(
    private readonly options: LaunchOptions,
    private readonly elastic: ElasticOptions,
    private readonly env: NodeJS.ProcessEnv,
  ) {
    this.local = new LocalWorkers(options, env, (message) => this.log(message));
  }

  async run(): Promise<number> {
    const unhandleSignals = this.local.handleSignals(false);
    const { masterAddr, masterPort, nprocPerNode } = this.options;
    let store: StoreServer | undefined;
    let server: RendezvousServer | undefined;
    let client: RendezvousClient | undefined;
    try {
      this.local.check(
        Array.from({ length: nprocPerNode }, (_, localRank) => localRank),
        false,
      );
      const secret = requireJobSecret(this.env, 'An elastic job');
      ({ store, server } = await this.hostRendezvous(secret));
      const address = await localAddressRoutingTo(masterAddr, masterPort).catch(() => 'unknown address');
      const name = `${address} (${hostname()}, pid ${process.pid})`;
      client = new RendezvousClient({
        host: masterAddr,
        port: masterPort,
        secret,
        name,
        nproc: nprocPerNode,
        heartbeatTimeoutMs: this.elastic.heartbeatTimeoutSeconds * 1_000,
        connectTimeoutMs: this.options.timeoutSeconds * 1_000,
      });
      this.log(`${name} joins the rendezvous at ${masterAddr}:${masterPort}.`);
      return await this.serve(client, secret);
    } catch (error) {
      this.log(`error: ${error instanceof Error ? error.message : String(error)}`);
      return this.local.failureExitCode();
    } finally {
      await this.local.stop();
      await client?.close();
      server?.close();
      await store?.close();
      this.local.close();
      unhandleSignals();
    }
  }

  private async serve(client: RendezvousClient, secret: string): Promise<number> {
    for (;;) {
      const event = await this.nextEvent(client);
      if (event.kind === 'interrupted') {
        const self = this.round === undefined ? 'this host' : `node ${this.round.nodeRank}`;
        client.leave(`fsdp-run on ${self} received ${event.signal}`);
        await this.local.stop(event.signal);
        this.log(`stopped by ${event.signal}; every worker has exited.`);
        return exitCodeOf(event.signal);
      }
      if (event.kind === 'lost') {
        this.log(`${event.error.message} Stopping the workers.`);
        return 1;
      }
      if (event.kind === 'workers') {
        this.workersOutcome = undefined;
        const { round, outcome } = event;
        if (round !== this.round?.round) continue;
        if (outcome.kind === 'success') {
          this.log(`round ${round}: every worker of this node exited 0.`);
          client.done(round);
          continue;
        }
        const message = `${describeExit(outcome.exit)} on node ${this.round.nodeRank}`;
        this.log(`round ${round}: ${message}; stopping the other workers.`);
        client.failed(round, message);
        await this.local.settle();
        await this.local.stop();
        await this.local.reportFailures();
        continue;
      }
      const message = event.event;
      if (message.type === 'round') {
        this.startRound(message, secret);
      } else if (message.type === 'stop') {
        this.log(`round ${message.round} stops (${message.reason}): ${message.message}.`);
        await this.endRound(message.reason === 'join');
        if (message.reason !== 'join') await this.local.reportFailures();
        client.rejoin();
      } else if (message.type === 'finish') {
        this.log('job finished: every worker of every node exited 0.');
        return 0;
      } else {
        this.log(`job failed: ${message.message}`);
        return 1;
      }
    }
  }

  /** The next thing to act on. A server event that loses the race stays pending for the next call. */
  private nextEvent(client: RendezvousClient): Promise<AgentEvent> {
    this.pendingServerEvent ??= client.next().then((event): AgentEvent => ({ kind: 'server', event }));
    return Promise.race([
      this.pendingServerEvent,
      ...(this.workersOutcome === undefined ? [] : [this.workersOutcome]),
      client.lost.then((error): AgentEvent => ({ kind: 'lost', error })),
      this.local.interrupted.then((signal): AgentEvent => ({ kind: 'interrupted', signal })),
    ]).then((event) => {
      if (event.kind === 'server') this.pendingServerEvent = undefined;
      return event;
    });
  }

  private startRound(round: RoundAssignment, secret: string): void {
    this.round = round;
    const { nprocPerNode, maxRestarts, timeoutSeconds } = this.options;
    this.log(
      `round ${round.round}: node ${round.nodeRank} of ${round.nnodes}, world size ${round.worldSize}, ${describeRanks(round.rankOffset, nprocPerNode)}, restarts ${round.restartCount} of ${maxRestarts}.`,
    );
    this.log(
      `round ${round.round} members: ${round.members.map((member) => `node ${member.nodeRank} ${member.name}`).join('; ')}.`,
    );
    const restartFile = join(tmpdir(), `fsdp-run-${process.pid}-round-${round.round}.restart`);
    this.restartFile = restartFile;
    rmSync(restartFile, { force: true });
    const { nnodes, nodeRank, store } = round;
    const options = { ...this.options, nnodes, nodeRank, masterAddr: store.host };
    const identity = {
      attempt: round.round,
      secret,
      port: store.port,
      timeoutMs: Math.round(timeoutSeconds * 1_000),
    };
    // [Note: per-rank memory caps], as in fixed-size jobs: fresh cgroups per round.
    const outcome = this.local.start(`round-${round.round}`, round.rankOffset, (rank, localRank) => {
      const environment = buildWorkerEnvironment(options, this.env, { ...identity, rank, localRank });
      Object.assign(environment.env, {
        WORLD_SIZE: String(round.worldSize),
        FSDP_STORE_PREFIX: store.prefix,
        FSDP_ELASTIC_ROUND: String(round.round),
        FSDP_RESTART_FILE: restartFile,
      });
      return environment;
    });
    this.workersOutcome = outcome.then(
      (result): AgentEvent => ({ kind: 'workers', round: round.round, outcome: result }),
    );
  }

  /**
   * Stops this round's workers. Before a restart for a join, first the pre-restart request
   * ([Note: pre-restart signal]) and up to --restart-grace seconds for them to checkpoint and exit.
   */
  private async endRound(checkpointFirst: boolean): Promise<void> {
    this.workersOutcome = undefined;
    const running = this.local.workers.filter((worker) => worker.running);
    if (checkpointFirst && running.length > 0 && this.restartFile !== undefined) {
      writeFileSync(this.restartFile, 'restart\n');
      for (const worker of running) worker.signal(RESTART_SIGNAL);
      this.log(
        `asked ${running.length} workers to checkpoint and exit (${RESTART_SIGNAL}, FSDP_RESTART_FILE); waiting up to ${this.elastic.restartGraceSeconds} s.`,
      );
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.all(running.map((worker) => worker.exited)),
        new Promise((resolve) => (timer = setTimeout(resolve, this.elastic.restartGraceSeconds * 1_000))),
      ]);
      clearTimeout(timer);
    }
    await this.local.stop();
    if (this.restartFile !== undefined) rmSync(this.restartFile, { force: true });
  }

  /**
   * Starts the job's Store on --master-addr:--master-port, and the rendezvous beside it, when
   * --master-addr is this host's and the port is free (else another launcher hosts them).
   */
  private async hostRendezvous(
    secret: string,
  ): Promise<{ store: StoreServer | undefined; server: RendezvousServer | undefined }> {
    const { masterPort } = this.options;
    const masterAddr = await localAddressOf(this.options.masterAddr);
    if (masterAddr === undefined) return { store: undefined, server: undefined };
    let server: RendezvousServer | undefined;
    const store = await startStoreServer({
      host: masterAddr,
      port: masterPort,
      secret,
      onConnectionError: (error) => server?.refused(error),
    }).catch(() => undefined);
    // Another launcher of this host got the port first: it hosts; this one is a client.
    if (store === undefined) return { store: undefined, server: undefined };
    server = new RendezvousServer({
      store,
      minNodes: this.elastic.minNodes,
      maxNodes: this.elastic.maxNodes,
      heartbeatTimeoutMs: this.elastic.heartbeatTimeoutSeconds * 1_000,
      joinTimeoutMs: this.elastic.joinTimeoutSeconds * 1_000,
      lastCallMs: this.elastic.lastCallSeconds * 1_000,
      maxRestarts: this.options.maxRestarts,
      log: (line) => this.log(line),
    });
    this.log(`hosting the rendezvous and the store at ${masterAddr}:${masterPort}.`);
    return { store, server };
  }

  private log(message: string): void {
    process.stderr.write(`fsdp-run[elastic]: ${message}\n`);
  }
}

/**
 * The address of this host that --master-addr names (an address, or a DNS name such as a
 * Kubernetes pod name, resolved here), or undefined when it names another host: then this
 * launcher does not host the rendezvous.
 */
async function localAddressOf(masterAddr: string): Promise<string | undefined> {
  const candidates = await lookup(masterAddr, { all: true }).catch(() => []);
  const local = new Set(
    Object.values(networkInterfaces()).flatMap((list) => (list ?? []).map((entry) => entry.address)),
  );
  return candidates.map((candidate) => candidate.address).find((address) => local.has(address));
}
