import { connect as connectTls, type TLSSocket } from 'node:tls';
import { validateJobSecret } from '../auth/job-secret.js';
import { isTlsFailure, storeTlsOptions } from '../auth/secure-socket.js';
import { CollectiveError } from '../errors.js';
import type { Store, StoreWaitOptions } from './store.js';
import {
  decodeStoreResponse,
  encodeStoreRequest,
  FrameDecoder,
  frame,
  STORE_LIMITS,
  type StoreRequest,
  type StoreResponse,
} from './store-protocol.js';

/** Options of connectStore: host, port, job secret, timeout. */
export interface ConnectStoreOptions {
  host: string;
  port: number;
  /** The job secret (see resolveJobSecret / readEnvironment). */
  secret: string;
  /**
   * Milliseconds: how long to keep retrying the connection while the server is not up yet, and
   * the default timeout of get and wait. Default 60 000.
   */
  timeoutMs?: number;
  /** Prefix added to every key (torch's PrefixStore): readEnvironment's `storePrefix`. */
  prefix?: string;
}

/** A request as the client's methods write it; `request` numbers it. */
type RequestWithoutId = StoreRequest extends infer R
  ? R extends StoreRequest
    ? Omit<R, 'id'>
    : never
  : never;

interface Pending {
  op: StoreRequest['op'];
  resolve(value: Uint8Array): void;
  reject(error: CollectiveError): void;
  timer: NodeJS.Timeout | undefined;
}

/** Extra time the client waits beyond a server-side timeout before declaring the store stalled. */
const STALL_GRACE_MS = 5_000;

/**
 * Connects to the rendezvous store, retrying unreachable addresses until `timeoutMs` (the server
 * may start after the client); the TLS-PSK handshake proves the job secret both ways ([Note:
 * store link]). Rejects with a CollectiveError: code 'auth' when the secrets differ (not
 * retried), 'timeout' when no server answered in time.
 */
export async function connectStore(options: ConnectStoreOptions): Promise<StoreClient> {
  const tls = storeTlsOptions(validateJobSecret(options.secret, 'connectStore({ secret })'));
  const timeoutMs = options.timeoutMs ?? 60_000;
  const deadline = Date.now() + timeoutMs;
  let delayMs = 20;
  for (;;) {
    const socket = await new Promise<TLSSocket | NodeJS.ErrnoException>((resolve) => {
      const secured = connectTls(tls.client(options.host, options.port));
      const timer = setTimeout(
        () => secured.destroy(Object.assign(new Error('TLS handshake timed out'), { code: 'ETIMEDOUT' })),
        Math.max(1_000, deadline - Date.now()),
      );
      secured.once('secureConnect', () => {
        clearTimeout(timer);
        secured.removeAllListeners('error');
        secured.on('error', () => {});
        secured.setNoDelay(true);
        resolve(secured);
      });
      secured.once('error', (error) => {
        clearTimeout(timer);
        secured.destroy();
        resolve(error);
      });
    });
    if (!(socket instanceof Error)) return new StoreClient(socket, timeoutMs, options.prefix ?? '', options);
    if (isTlsFailure(socket)) {
      throw new CollectiveError(
        `The server refused this process: the TLS-PSK handshake with the store at ${options.host}:${options.port} failed (${(socket as { reason?: string }).reason ?? socket.message}); it holds a different job secret.`,
        {
          code: 'auth',
          op: 'connectStore',
          cause: socket,
          fix: 'give every process of the job the same FSDP_JOB_SECRET (or FSDP_JOB_SECRET_FILE).',
        },
      );
    }
    if (Date.now() + delayMs > deadline) {
      throw new CollectiveError(
        `Could not reach the store at ${options.host}:${options.port} within ${timeoutMs} ms (last error: ${socket.code ?? socket.message}).`,
        {
          code: 'timeout',
          op: 'connectStore',
          cause: socket,
          fix: 'check MASTER_ADDR/MASTER_PORT and that rank 0 (or fsdp-run on node 0) is running and reachable.',
        },
      );
    }
    await new Promise((resolve) => setTimeout(resolve, delayMs));
    delayMs = Math.min(delayMs * 2, 500);
  }
}

/**
 * A Store client over one TLS-PSK connection ([Note: store link]); requests are pipelined and answered
 * by id. State: 'open' until `close()` ('closed') or until the connection drops ('lost'); in
 * either case every pending and later request fails with a CollectiveError.
 */
export class StoreClient implements Store {
  private state: 'open' | 'closed' | 'lost' = 'open';
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private readonly lostListeners = new Set<(error: CollectiveError) => void>();
  private readonly address: string;
  private keepAliveTimer: NodeJS.Timeout | undefined;

  /** @internal Use connectStore. */
  constructor(
    private readonly socket: TLSSocket,
    private readonly timeoutMs: number,
    private readonly prefix: string,
    endpoint: { host: string; port: number },
  ) {
    this.address = `${endpoint.host}:${endpoint.port}`;
    const decoder = new FrameDecoder(STORE_LIMITS.maxFrameBytes, 9);
    socket.on('data', (chunk: Buffer) => {
      try {
        for (const body of decoder.push(chunk)) this.receive(decodeStoreResponse(body));
      } catch (error) {
        this.markLost(error);
        socket.destroy();
      }
    });
    socket.on('close', () => this.markLost(undefined));
    socket.resume();
    // [Note: process exit] The connection holds the event loop only while a request waits.
    socket.unref();
  }

  /** Calls `listener` once if the connection to the store drops (not after `close()`). */
  onConnectionLost(listener: (error: CollectiveError) => void): () => void {
    this.lostListeners.add(listener);
    return () => this.lostListeners.delete(listener);
  }

  /** Sets `key` to `value` on the store server. */
  async set(key: string, value: Uint8Array | string): Promise<void> {
    await this.request({ op: 'set', key: this.prefix + key, value: toBytes(value) });
  }

  get(key: string, options: StoreWaitOptions = {}): Promise<Uint8Array> {
    const timeoutMs = options.timeoutMs ?? this.timeoutMs;
    return this.request({ op: 'get', key: this.prefix + key, timeoutMs }, timeoutMs + STALL_GRACE_MS);
  }

  async add(key: string, delta: number): Promise<number> {
    if (!Number.isSafeInteger(delta)) {
      throw new CollectiveError(`Store add needs an integer delta; got ${delta}.`, {
        code: 'invalid-argument',
        op: 'store.add',
      });
    }
    const result = await this.request({ op: 'add', key: this.prefix + key, delta });
    return Buffer.from(result).readDoubleBE(0);
  }

  compareSet(key: string, expected: Uint8Array | string, desired: Uint8Array | string): Promise<Uint8Array> {
    const [before, after] = [toBytes(expected), toBytes(desired)];
    return this.request({ op: 'compareSet', key: this.prefix + key, expected: before, desired: after });
  }

  async wait(keys: readonly string[], options: StoreWaitOptions = {}): Promise<void> {
    const timeoutMs = options.timeoutMs ?? this.timeoutMs;
    const prefixed = keys.map((key) => this.prefix + key);
    await this.request({ op: 'wait', keys: prefixed, timeoutMs }, timeoutMs + STALL_GRACE_MS);
  }

  /** Whether every key exists now, without waiting. */
  async check(keys: readonly string[]): Promise<boolean> {
    return (await this.request({ op: 'check', keys: keys.map((key) => this.prefix + key) }))[0] === 1;
  }

  /**
   * Pings the store every `intervalMs`; a ping not answered within `timeoutMs` (a stalled or
   * unreachable store host whose TCP connection has not closed) loses the connection at once,
   * as a close would: pending and later requests fail, `onConnectionLost` listeners are told.
   */
  keepAlive(intervalMs: number, timeoutMs: number): void {
    this.keepAliveTimer = setInterval(() => {
      this.request({ op: 'check', keys: [] }, timeoutMs).catch((error: unknown) => {
        if (error instanceof CollectiveError && error.code === 'timeout') {
          this.markLost(error);
          this.socket.destroy();
        }
      });
    }, intervalMs);
    this.keepAliveTimer.unref();
  }

  async delete(key: string): Promise<boolean> {
    return (await this.request({ op: 'delete', key: this.prefix + key }))[0] === 1;
  }

  /**
   * Asks the server to set `key` to `value` when this connection closes for any reason (also a
   * crash or SIGKILL of this process): how launchers learn that a peer launcher died.
   */
  async setOnDisconnect(key: string, value: Uint8Array | string): Promise<void> {
    await this.request({ op: 'setOnDisconnect', key: this.prefix + key, value: toBytes(value) });
  }

  /** Cancels a `setOnDisconnect` for `key`. */
  async clearOnDisconnect(key: string): Promise<void> {
    await this.request({ op: 'clearOnDisconnect', key: this.prefix + key });
  }

  /** Closes the connection to the store server. */
  async close(): Promise<void> {
    if (this.state !== 'open') return;
    this.state = 'closed';
    clearInterval(this.keepAliveTimer);
    this.failPending(new CollectiveError('The store client was closed.', { code: 'closed' }));
    // Whoever awaits the close holds the event loop until it is done.
    this.socket.ref();
    await new Promise<void>((resolve) => {
      this.socket.once('close', () => resolve());
      this.socket.end();
      setTimeout(() => this.socket.destroy(), 1_000).unref();
    });
  }

  /** Sends a request; `deadlineMs` bounds the wait for its answer on this side. */
  private request(request: RequestWithoutId, deadlineMs?: number): Promise<Uint8Array> {
    const op = `store.${request.op}`;
    if (this.state !== 'open') {
      const code = this.state === 'closed' ? 'closed' : 'store';
      const message = `Store ${request.op} on a ${this.state} connection to ${this.address}.`;
      return Promise.reject(new CollectiveError(message, { code, op }));
    }
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timeOut = () => {
        this.forget(id);
        const fix = 'the store process is stalled or unreachable; check rank 0 / node 0.';
        const message = `The store at ${this.address} did not answer ${request.op} in ${deadlineMs} ms.`;
        reject(new CollectiveError(message, { code: 'timeout', op, fix }));
      };
      const timer =
        deadlineMs === undefined ? undefined : setTimeout(timeOut, Math.min(deadlineMs, 2 ** 31 - 1));
      if (this.pending.size === 0) this.socket.ref();
      this.pending.set(id, { op: request.op, resolve, reject, timer });
      this.socket.write(frame(encodeStoreRequest({ ...request, id } as StoreRequest)));
    });
  }

  private forget(id: number): Pending | undefined {
    const pending = this.pending.get(id);
    this.pending.delete(id);
    if (this.pending.size === 0) this.socket.unref();
    clearTimeout(pending?.timer);
    return pending;
  }

  private receive(response: StoreResponse): void {
    const pending = this.pending.has(response.id) ? this.forget(response.id)! : undefined;
    if (pending === undefined) return;
    if (response.status === 'ok') pending.resolve(response.value);
    else
      pending.reject(
        new CollectiveError(response.message, { code: response.code, op: `store.${pending.op}` }),
      );
  }

  private markLost(cause: unknown): void {
    if (this.state !== 'open') return;
    this.state = 'lost';
    clearInterval(this.keepAliveTimer);
    const why = cause instanceof CollectiveError && cause.code === 'timeout' ? `: ${cause.message}` : '.';
    const error = new CollectiveError(`Lost the connection to the store at ${this.address}${why}`, {
      code: 'store',
      cause,
      fix: 'the store process (rank 0 or fsdp-run on node 0) exited or the network failed; see its log.',
    });
    this.failPending(error);
    for (const listener of this.lostListeners) listener(error);
  }

  private failPending(error: CollectiveError): void {
    for (const id of [...this.pending.keys()]) this.forget(id)!.reject(error);
    this.socket.unref();
  }
}

function toBytes(value: Uint8Array | string): Uint8Array {
  return typeof value === 'string' ? Buffer.from(value, 'utf8') : value;
}
