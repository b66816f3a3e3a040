import type { Worker } from 'node:worker_threads';
import { CollectiveError } from '../errors.js';
import type { BackendDefinition } from './backend-definition.js';
import type { EngineInit } from './engine/engine-base.js';
import { describeOp, type MainToWorkerMessage } from './op-message.js';
import { loadableModule, startWorker } from './start-worker.js';
import { DEPARTED, DEPARTING, FAILED, markFailed, PENDING, readFailure, SUCCEEDED } from './status-word.js';

type ClientState = 'starting' | 'ready' | 'destroying' | 'destroyed';

/**
 * [Note: process exit]
 * A process group neither keeps a finished script alive nor fails its peers when the process ends:
 * - the communication worker is unref()'d; what waits for it holds the loop (an awaited Work's
 *   timer, start-up and destroy timers; the store client's socket only while a request is out);
 * - on 'exit' with code 0 the main thread sets every live group's departure word to DEPARTING,
 *   posts 'depart', and blocks (at most EXIT_FLUSH_MS) until the worker ran every queued op and
 *   the engine said goodbye ([Note: clean departure]): DEPARTED. Only then does Node stop it;
 * - an op no caller saw that failed, or did not finish in time, is reported on stderr (one line per
 *   group) and the exit code becomes 1.
 * Another exit code skips all this: no goodbye, so peers see a loss.
 */
const EXIT_FLUSH_MS = 30_000;

const liveClients = new Set<CommunicationClient>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', (code) => {
    if (code !== 0) return;
    const leaving = [...liveClients].filter((client) => client.startDeparture());
    const deadline = Date.now() + EXIT_FLUSH_MS;
    let failed = false;
    for (const client of leaving) failed = !client.finishDeparture(deadline) || failed;
    if (failed) process.exitCode = 1;
  });
}

interface WorkerReply {
  type: string;
  port?: number;
  /** tcp: [Note: local peer sockets]. */
  localName?: string;
  message?: string;
}

/** The main thread's side of one communication worker; if it dies, pending ops fail from here. */
export class CommunicationClient {
  private state: ClientState = 'starting';
  /** Ops whose outcome no caller saw yet, unless they succeeded ([Note: process exit]). */
  private readonly pending = new Map<Int32Array, string>();
  private unseenAtExit: [Int32Array, string][] = [];
  private readonly waiters = new Map<string, (reply: WorkerReply) => void>();
  private exitError: CollectiveError | undefined;
  private readonly exited: Promise<void>;

  private constructor(
    private readonly worker: Worker,
    private readonly init: EngineInit,
    private readonly backend: BackendDefinition<never>,
  ) {
    worker.on('message', (reply: WorkerReply) => {
      const waiter =
        this.waiters.get(reply.type) ?? (reply.type === 'init-failed' ? this.anyWaiter() : undefined);
      if (waiter !== undefined) waiter(reply);
    });
    this.exited = new Promise((resolve) => {
      worker.on('error', (error) => this.failAll(error));
      worker.on('exit', (code) => {
        liveClients.delete(this);
        this.failAll(new Error(`the communication worker exited with code ${code}`));
        resolve();
      });
    });
  }

  static async start<Config>(
    backend: BackendDefinition<Config>,
    init: EngineInit,
    transferList: readonly (import('node:worker_threads').MessagePort | ArrayBuffer)[],
    readyType: string,
    timeoutMs: number,
  ): Promise<{ client: CommunicationClient; reply: WorkerReply }> {
    if (backend.engineModule !== undefined) init.engineModule = loadableModule(backend.engineModule);
    init.departure = new Int32Array(new SharedArrayBuffer(4));
    const worker = startWorker('comm-worker', { workerData: init, transferList: [...transferList] as never });
    const client = new CommunicationClient(worker, init, backend as BackendDefinition<never>);
    // [Note: process exit] After the listeners: adding one refs the worker's port again.
    worker.unref();
    installExitHook();
    liveClients.add(client);
    const reply = await client.expect(readyType, timeoutMs);
    return { client, reply };
  }

  expect(type: string, timeoutMs: number): Promise<WorkerReply> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters.delete(type);
        reject(
          new CollectiveError(`The communication worker did not report '${type}' within ${timeoutMs} ms.`, {
            code: 'timeout',
            rank: this.init.rank,
            fix: 'check that every rank of the group was started and can reach the others; raise timeoutMs for slow starts.',
          }),
        );
      }, timeoutMs);
      this.waiters.set(type, (reply) => {
        clearTimeout(timer);
        this.waiters.delete(type);
        if (reply.type === 'init-failed') {
          reject(
            new CollectiveError(
              `The communication worker of rank ${this.init.rank} failed to start: ${reply.message}`,
              { code: 'closed', rank: this.init.rank },
            ),
          );
        } else resolve(reply);
      });
    });
  }

  markReady(): void {
    if (this.state !== 'starting') throw new Error(`CommunicationClient.markReady from state ${this.state}`);
    this.state = 'ready';
  }

  isUsable(): boolean {
    return this.state === 'ready' && this.exitError === undefined;
  }

  post(message: MainToWorkerMessage): void {
    if (message.type === 'op') {
      for (const status of this.pending.keys())
        if (Atomics.load(status, 0) === SUCCEEDED) this.pending.delete(status);
      if (this.exitError !== undefined) {
        markFailed(message.status, this.exitError);
        return;
      }
      this.pending.set(message.status, describeOp(message));
    }
    this.worker.postMessage(message);
  }

  settled(status: Int32Array): void {
    this.pending.delete(status);
  }

  async destroy(): Promise<void> {
    if (this.state === 'destroying' || this.state === 'destroyed') return this.exited;
    this.state = 'destroying';
    liveClients.delete(this);
    this.worker.ref();
    Atomics.store(this.init.abort, 0, 1);
    this.backend.abort(this.init);
    const finished = this.expect('destroyed', 10_000).catch(() => undefined);
    this.worker.postMessage({ type: 'destroy' });
    await finished;
    await Promise.race([this.exited, new Promise((resolve) => setTimeout(resolve, 2_000).unref())]);
    await this.worker.terminate();
    this.state = 'destroyed';
  }

  /** [Note: process exit]; false when there is nothing to do. */
  startDeparture(): boolean {
    const word = this.init.departure;
    if (!this.isUsable() || word === undefined) return false;
    this.unseenAtExit = [...this.pending];
    Atomics.store(word, 0, DEPARTING);
    this.worker.postMessage({ type: 'depart' });
    return true;
  }

  /** Blocks until departed or `deadline`; reports unseen failures on stderr; true when there were none. */
  finishDeparture(deadline: number): boolean {
    const word = this.init.departure!;
    while (Atomics.load(word, 0) === DEPARTING) {
      const remaining = deadline - Date.now();
      if (remaining <= 0) break;
      Atomics.wait(word, 0, DEPARTING, remaining);
    }
    const departed = Atomics.load(word, 0) === DEPARTED;
    const outcomes = this.unseenAtExit.flatMap(([status, description]) => {
      const state = Atomics.load(status, 0);
      if (state === PENDING) return [`${description} did not finish within ${EXIT_FLUSH_MS / 1000} s`];
      if (state === FAILED) return [`${description} failed: ${readFailure(status).message}`];
      return [];
    });
    if (outcomes.length > 0 || !departed) {
      const count = outcomes.length;
      const what =
        count > 0
          ? `${count} collective${count === 1 ? '' : 's'} it never waited for that did not succeed: ${outcomes.join('; ')}`
          : `its goodbye to its peers unsent after ${EXIT_FLUSH_MS / 1000} s (they may report it lost)`;
      process.stderr.write(`fsdp-ts: rank ${this.init.rank} exited with ${what}.\n`);
    }
    return outcomes.length === 0;
  }

  private anyWaiter(): ((reply: WorkerReply) => void) | undefined {
    return this.waiters.values().next().value;
  }

  private failAll(error: unknown): void {
    for (const waiter of [...this.waiters.values()]) waiter({ type: 'init-failed', message: String(error) });
    this.exitError ??= new CollectiveError(
      `The communication worker of rank ${this.init.rank} is gone: ${String(error)}`,
      {
        code: 'closed',
        rank: this.init.rank,
        cause: error,
      },
    );
    for (const status of this.pending.keys())
      if (Atomics.load(status, 0) === PENDING) markFailed(status, this.exitError);
    this.pending.clear();
  }
}
