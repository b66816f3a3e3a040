import { randomBytes } from 'node:crypto';
import { CollectiveError } from '../errors.js';
import { connectStore, type StoreClient } from '../store/store-client.js';
import {
  decodeServerMessage,
  encodeMessage,
  type LauncherMessage,
  RENDEZVOUS_KEYS,
  type ServerMessage,
} from './rendezvous-messages.js';

export interface RendezvousClientOptions {
  host: string;
  port: number;
  secret: string;
  /** How logs and errors name this launcher. */
  name: string;
  nproc: number;
  /** The server is lost after this long without an answer (heartbeats are sent 5 times as often). */
  heartbeatTimeoutMs: number;
  /** How long the first answer may take (the master host's launcher may start later). */
  connectTimeoutMs: number;
}

/** What the launcher acts on: a round to run, a stop, or the job's verdict. */
export type RendezvousEvent = Extract<ServerMessage, { type: 'round' | 'stop' | 'finish' | 'abort' }>;

/**
 * One launcher's side of the rendezvous, through the job's Store on the master host ([Note:
 * rendezvous keys]): joins, sends heartbeats, reports its workers' outcome and hands the
 * server's decisions to the launcher in order (`next()`). `lost` resolves when the store is not
 * reached in time, refuses this launcher's TLS-PSK handshake (a different job secret), stops
 * answering or closes: each ends the job on this host.
 */
export class RendezvousClient {
  private readonly id = randomBytes(8).toString('hex');
  private readonly ready: Promise<StoreClient | undefined>;
  private token: string | undefined;
  private closed = false;
  private readonly events: RendezvousEvent[] = [];
  private waiter: ((event: RendezvousEvent) => void) | undefined;
  private readonly heartbeat: NodeJS.Timeout;
  private resolveLost!: (error: CollectiveError) => void;
  /** Resolves (never rejects) when the rendezvous is unreachable or refused this launcher. */
  readonly lost: Promise<CollectiveError>;

  constructor(private readonly options: RendezvousClientOptions) {
    this.lost = new Promise((resolve) => (this.resolveLost = resolve));
    const { host, port, secret } = options;
    this.ready = connectStore({ host, port, secret, timeoutMs: options.connectTimeoutMs }).then(
      (store) => {
        if (this.closed) return void store.close();
        store.onConnectionLost((error) => {
          const stalled = error.cause instanceof CollectiveError && error.cause.code === 'timeout';
          if (stalled)
            this.lose('timeout', `did not answer for ${options.heartbeatTimeoutMs} ms`, error.cause);
          else this.lose('store', 'closed the connection', error);
        });
        store.keepAlive(Math.max(50, options.heartbeatTimeoutMs / 5), options.heartbeatTimeoutMs);
        void this.receive(store);
        return store;
      },
      (cause: unknown) => {
        const refused = cause instanceof CollectiveError && cause.code === 'auth';
        if (refused) this.lose('auth', "refused this launcher's TLS-PSK handshake", cause);
        else this.lose('timeout', `did not answer for ${options.connectTimeoutMs} ms`, cause);
        return undefined;
      },
    );
    this.heartbeat = setInterval(() => this.beat(), Math.max(50, options.heartbeatTimeoutMs / 5));
    this.heartbeat.unref();
    this.send({ type: 'join', name: options.name, nproc: options.nproc });
  }

  /** The next decision of the server, in order. */
  next(): Promise<RendezvousEvent> {
    const queued = this.events.shift();
    if (queued !== undefined) return Promise.resolve(queued);
    return new Promise((resolve) => (this.waiter = resolve));
  }

  /** Joins the next round (after this launcher's workers of the last one have stopped). */
  rejoin(): void {
    if (this.token !== undefined)
      this.send({ type: 'join', name: this.options.name, nproc: this.options.nproc, token: this.token });
  }

  done(round: number): void {
    if (this.token !== undefined) this.send({ type: 'done', token: this.token, round });
  }

  failed(round: number, message: string): void {
    if (this.token !== undefined) this.send({ type: 'failed', token: this.token, round, message });
  }

  leave(message: string): void {
    if (this.token !== undefined) this.send({ type: 'leave', token: this.token, message });
  }

  /** Stops heartbeats and closes the store connection (messages already sent are delivered). */
  async close(): Promise<void> {
    clearInterval(this.heartbeat);
    this.closed = true;
    await (await this.ready)?.close();
  }

  /** Writes one message; requests leave in order on the one store connection. */
  private send(message: LauncherMessage): void {
    void this.ready.then((store) =>
      store?.set(RENDEZVOUS_KEYS.inbox + this.id, encodeMessage(message)).catch(() => {}),
    );
  }

  private beat(): void {
    if (this.token === undefined) return;
    this.send({ type: 'heartbeat', token: this.token });
  }

  private lose(code: 'auth' | 'timeout' | 'store', what: string, cause: unknown): void {
    if (this.closed) return;
    clearInterval(this.heartbeat);
    const { host, port } = this.options;
    this.resolveLost(
      new CollectiveError(`The rendezvous at ${host}:${port} ${what}.`, {
        code,
        cause,
        fix:
          code === 'auth'
            ? 'use the same FSDP_JOB_SECRET (or FSDP_JOB_SECRET_FILE) on every host of the job.'
            : 'check that the launcher of the master host runs and is reachable at --master-addr/--master-port.',
      }),
    );
  }

  private async receive(store: StoreClient): Promise<void> {
    for (let sequence = 0; ; sequence++) {
      const key = RENDEZVOUS_KEYS.outbox(this.id, sequence);
      let value: Uint8Array;
      try {
        value = await store.get(key, { timeoutMs: 3_600_000 });
      } catch (error) {
        if (error instanceof CollectiveError && error.code === 'timeout') {
          sequence--;
          continue;
        }
        return; // The connection closed: `lost` says so unless this launcher closed it.
      }
      void store.delete(key).catch(() => {});
      const message = decodeServerMessage(Buffer.from(value));
      if (message === undefined) continue;
      if (message.type === 'welcome') this.token = message.token;
      else this.deliver(message);
    }
  }

  private deliver(event: RendezvousEvent): void {
    const waiter = this.waiter;
    this.waiter = undefined;
    if (waiter !== undefined) waiter(event);
    else this.events.push(event);
  }
}
