import type { Worker } from 'node:worker_threads';
import { CollectiveError } from '../errors.js';
import type { BackendDefinition } from './backend-definition.js';
import type { EngineInit } from './engine/engine.js';
import type { MainToWorkerMessage } from './op-message.js';
import { loadableModule, startWorker } from './start-worker.js';
import { markFailed, PENDING } from './status-word.js';

type ClientState = 'starting' | 'ready' | 'destroying' | 'destroyed';

interface WorkerReply {
  type: string;
  port?: number;
  /** tcp: the abstract socket name the worker also listens on ([Note: local peer sockets]). */
  localName?: string;
  message?: string;
}

/**
 * The main thread's side of one communication worker: starts it, hands it ops, and joins it on
 * destroy. If the worker dies, every op still pending is failed from here, so no waiter hangs
 * (see [Note: status word]).
 */
export class CommunicationClient {
  private state: ClientState = 'starting';
  private readonly pending = new Set<Int32Array>();
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
        this.failAll(new Error(`the communication worker exited with code ${code}`));
        resolve();
      });
    });
  }

  /** Starts a worker and returns once it answered `readyType` ('ready' or 'listening'). */
  static async start<Config>(
    backend: BackendDefinition<Config>,
    init: EngineInit,
    transferList: readonly (import('node:worker_threads').MessagePort | ArrayBuffer)[],
    readyType: string,
    timeoutMs: number,
  ): Promise<{ client: CommunicationClient; reply: WorkerReply }> {
    if (backend.engineModule !== undefined) init.engineModule = loadableModule(backend.engineModule);
    const worker = startWorker('comm-worker', { workerData: init, transferList: [...transferList] as never });
    const client = new CommunicationClient(worker, init, backend as BackendDefinition<never>);
    const reply = await client.expect(readyType, timeoutMs);
    return { client, reply };
  }

  /** Waits for the worker's next message of this type (or fails on 'init-failed' / timeout). */
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
      for (const status of this.pending) if (Atomics.load(status, 0) !== PENDING) this.pending.delete(status);
      if (this.exitError !== undefined) {
        markFailed(message.status, this.exitError);
        return;
      }
      this.pending.add(message.status);
    }
    this.worker.postMessage(message);
  }

  /** Stops the worker after its current op (pending ones fail with code 'closed'); joins it. */
  async destroy(): Promise<void> {
    if (this.state === 'destroying' || this.state === 'destroyed') return this.exited;
    this.state = 'destroying';
    Atomics.store(this.init.abort, 0, 1);
    this.backend.abort(this.init);
    const finished = this.expect('destroyed', 10_000).catch(() => undefined);
    this.worker.postMessage({ type: 'destroy' });
    await finished;
    await Promise.race([this.exited, new Promise((resolve) => setTimeout(resolve, 2_000).unref())]);
    await this.worker.terminate();
    this.state = 'destroyed';
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
    for (const status of this.pending)
      if (Atomics.load(status, 0) === PENDING) markFailed(status, this.exitError);
    this.pending.clear();
  }
}
