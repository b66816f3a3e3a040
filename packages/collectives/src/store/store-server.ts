import type { Socket } from 'node:net';
import { createServer, type Server, type TLSSocket } from 'node:tls';
import { validateJobSecret } from '../auth/job-secret.js';
import { storeTlsOptions } from '../auth/secure-socket.js';
import { CollectiveError } from '../errors.js';
import {
  decodeStoreRequest,
  encodeStoreResponse,
  FrameDecoder,
  frame,
  STORE_LIMITS,
  type StoreRequest,
  type StoreResponse,
} from './store-protocol.js';

/** Options of startStoreServer: host, port, job secret, handshake timeout. */
export interface StoreServerOptions {
  /** Address to bind; default '127.0.0.1'. A wildcard ('0.0.0.0', '::') needs `allowWildcard`. */
  host?: string;
  /** Port to bind; 0 (the default) picks a free one, reported by `StoreServer.port`. */
  port?: number;
  /** The job secret every client must prove (the TLS-PSK handshake, [Note: store link]). */
  secret: string;
  /** Milliseconds a client has to finish the handshake; default 10 000. */
  handshakeTimeoutMs?: number;
  /** Permit binding every interface. Off by default: bind the one address peers reach. */
  allowWildcard?: boolean;
  /** Called for each connection dropped for failing the handshake or sending a malformed frame. */
  onConnectionError?: (error: unknown) => void;
}

/** A running rendezvous store server: its address, open connections, and close. */
export interface StoreServer {
  readonly host: string;
  readonly port: number;
  /** Stops listening and closes every connection; pending waits fail on the clients. */
  close(): Promise<void>;
  /**
   * Lets the process end while the server runs (its listening socket and connections no longer
   * hold the event loop): a rank 0 that hosts the job's store ends with its script, as with
   * torch's TCPStore ([Note: process exit] in communication-client.ts).
   */
  unref(): void;
  /**
   * @internal For the rendezvous that runs beside the store in this process: sets `key` as a
   * client's `set` would, and calls `listener` on every write to a key under `prefix`, in order.
   */
  readonly local: {
    set(key: string, value: Uint8Array | string): void;
    watch(prefix: string, listener: (key: string, value: Uint8Array) => void): void;
  };
}

const WILDCARDS = new Set(['', '0.0.0.0', '::', '0:0:0:0:0:0:0:0', '::0']);

/**
 * Starts the rendezvous store server (normally rank 0 or the launcher, on MASTER_ADDR:MASTER_PORT).
 * Every connection must pass the TLS-PSK handshake of the job secret ([Note: store link]); its
 * records are then sealed with AES-256-GCM. A connection that fails the handshake or sends a
 * malformed frame is closed and the server keeps serving the others.
 */
export async function startStoreServer(options: StoreServerOptions): Promise<StoreServer> {
  const host = options.host ?? '127.0.0.1';
  if (WILDCARDS.has(host) && options.allowWildcard !== true) {
    throw new CollectiveError(`Refusing to bind the store to the wildcard address '${host}'.`, {
      code: 'invalid-argument',
      expected: 'one interface address, e.g. 127.0.0.1 or the address peers use for MASTER_ADDR',
      actual: host,
      fix: 'pass that address as host, or allowWildcard: true if every interface is really wanted.',
    });
  }
  const secret = validateJobSecret(options.secret, 'startStoreServer({ secret })');
  const state = new StoreState();
  const sockets = new Set<Socket>();
  let referenced = true;
  const server: Server = createServer({
    ...storeTlsOptions(secret).server,
    handshakeTimeout: options.handshakeTimeoutMs ?? 10_000,
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    if (!referenced) socket.unref();
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    socket.setNoDelay(true);
  });
  server.on('tlsClientError', (cause: Error & { reason?: string }, socket: TLSSocket) => {
    socket.destroy();
    const reason = cause.reason ?? cause.message;
    options.onConnectionError?.(
      new CollectiveError(`A peer failed the store's TLS-PSK handshake (${reason}); refused it.`, {
        code: 'auth',
        cause,
        fix: 'give every process of the job the same FSDP_JOB_SECRET (or FSDP_JOB_SECRET_FILE).',
      }),
    );
  });
  server.on('secureConnection', (socket: TLSSocket) => {
    socket.on('error', () => {});
    const decoder = new FrameDecoder(STORE_LIMITS.maxFrameBytes, 5);
    const client: StoreClientHandle = {
      onDisconnect: new Map(),
      respond: (response) => {
        if (!socket.destroyed) socket.write(frame(encodeStoreResponse(response)));
      },
    };
    socket.on('close', () => state.disconnect(client));
    socket.on('data', (chunk: Buffer) => {
      try {
        for (const body of decoder.push(chunk)) state.handle(client, decodeStoreRequest(body));
      } catch (error) {
        socket.destroy();
        options.onConnectionError?.(error);
      }
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', (cause) =>
      reject(
        new CollectiveError(`Cannot start the store on ${host}:${options.port ?? 0}.`, {
          code: 'store',
          cause,
          fix: 'pick a free port (or 0) and an address of this host.',
        }),
      ),
    );
    server.listen({ host, port: options.port ?? 0, exclusive: true }, resolve);
  });
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  return {
    host,
    port,
    local: {
      set: (key, value) => state.write(key, typeof value === 'string' ? Buffer.from(value, 'utf8') : value),
      watch: (prefix, listener) => state.watchers.push({ prefix, listener }),
    },
    unref: () => {
      referenced = false;
      server.unref();
      for (const socket of sockets) socket.unref();
    },
    close: () =>
      new Promise<void>((resolve) => {
        // Whoever awaits the close holds the event loop until it is done.
        server.ref();
        state.closeAll();
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** One authenticated connection as the store state sees it. */
interface StoreClientHandle {
  respond(response: StoreResponse): void;
  /** Keys set to a value when this connection closes (see `setOnDisconnect`). */
  onDisconnect: Map<string, Uint8Array>;
}

interface Waiter {
  client: StoreClientHandle;
  id: number;
  op: 'get' | 'wait';
  keys: string[];
  timer: NodeJS.Timeout;
}

const EMPTY = new Uint8Array(0);

/**
 * The store's data and its waiting requests, independent of sockets.
 * [Note: store waits] A get or wait on missing keys parks a Waiter; every write re-checks the
 * waiters of the written key; the server-side timer answers 'timeout' naming the missing keys.
 */
class StoreState {
  private readonly values = new Map<string, Uint8Array>();
  private readonly waiters = new Set<Waiter>();
  /** Called on every write to a key under `prefix`, in order (StoreServer.local.watch). */
  readonly watchers: { prefix: string; listener: (key: string, value: Uint8Array) => void }[] = [];

  disconnect(client: StoreClientHandle): void {
    for (const waiter of this.waiters) {
      if (waiter.client === client) this.dropWaiter(waiter);
    }
    for (const [key, value] of client.onDisconnect) this.write(key, value);
    client.onDisconnect.clear();
  }

  closeAll(): void {
    for (const waiter of this.waiters) this.dropWaiter(waiter);
  }

  handle(client: StoreClientHandle, request: StoreRequest): void {
    const response = this.answer(client, request);
    if (response !== undefined) client.respond(response);
  }

  /** The immediate response to a request, or undefined when it waits (answered later). */
  private answer(client: StoreClientHandle, request: StoreRequest): StoreResponse | undefined {
    const ok = (value: Uint8Array): StoreResponse => ({ status: 'ok', id: request.id, value });
    switch (request.op) {
      case 'set':
        this.write(request.key, request.value);
        return ok(EMPTY);
      case 'get':
      case 'wait': {
        const keys = request.op === 'get' ? [request.key] : request.keys;
        const waiter: Waiter = {
          client,
          id: request.id,
          op: request.op,
          keys,
          timer: setTimeout(
            () => this.timeOut(waiter, request.timeoutMs),
            Math.min(request.timeoutMs, 2 ** 31 - 1),
          ),
        };
        this.waiters.add(waiter);
        this.tryAnswer(waiter);
        return undefined;
      }
      case 'check':
        return ok(Uint8Array.of(request.keys.every((key) => this.values.has(key)) ? 1 : 0));
      case 'add': {
        const current = this.values.get(request.key);
        const text = current === undefined ? '0' : Buffer.from(current).toString('utf8');
        if (!/^-?\d+$/.test(text) || !Number.isSafeInteger(Number(text) + request.delta)) {
          return {
            status: 'error',
            id: request.id,
            code: 'store',
            message: `Store add on key '${request.key}': the value '${text.slice(0, 40)}' is not an integer, or the sum overflows. Fix: use add only on keys that only add writes.`,
          };
        }
        const sum = Number(text) + request.delta;
        this.write(request.key, Buffer.from(String(sum), 'utf8'));
        const result = Buffer.alloc(8);
        result.writeDoubleBE(sum, 0);
        return ok(result);
      }
      case 'compareSet': {
        const current = this.values.get(request.key);
        const matches =
          current === undefined
            ? request.expected.length === 0
            : Buffer.from(current).equals(Buffer.from(request.expected));
        if (matches) this.write(request.key, request.desired);
        return ok(this.values.get(request.key) ?? EMPTY);
      }
      case 'delete':
        return ok(Uint8Array.of(this.values.delete(request.key) ? 1 : 0));
      case 'setOnDisconnect':
        client.onDisconnect.set(request.key, request.value);
        return ok(EMPTY);
      case 'clearOnDisconnect':
        client.onDisconnect.delete(request.key);
        return ok(EMPTY);
    }
  }

  /** Sets `key` as a client's `set` does. */
  write(key: string, value: Uint8Array): void {
    this.values.set(key, value);
    for (const { prefix, listener } of this.watchers) if (key.startsWith(prefix)) listener(key, value);
    for (const waiter of this.waiters) {
      if (waiter.keys.includes(key)) this.tryAnswer(waiter);
    }
  }

  private tryAnswer(waiter: Waiter): void {
    if (!waiter.keys.every((key) => this.values.has(key))) return;
    this.dropWaiter(waiter);
    const value = waiter.op === 'get' ? this.values.get(waiter.keys[0]!)! : EMPTY;
    waiter.client.respond({ status: 'ok', id: waiter.id, value });
  }

  private timeOut(waiter: Waiter, timeoutMs: number): void {
    this.dropWaiter(waiter);
    const missing = waiter.keys.filter((key) => !this.values.has(key));
    const error = new CollectiveError(
      `Store ${waiter.op} timed out after ${timeoutMs} ms waiting for key${missing.length === 1 ? '' : 's'} ${formatKeys(missing)}.`,
      {
        code: 'timeout',
        op: `store.${waiter.op}`,
        fix: 'check that every rank started and reached the same point, or raise the timeout.',
      },
    );
    waiter.client.respond({ status: 'error', id: waiter.id, code: 'timeout', message: error.message });
  }

  private dropWaiter(waiter: Waiter): void {
    clearTimeout(waiter.timer);
    this.waiters.delete(waiter);
  }
}

function formatKeys(keys: readonly string[]): string {
  const shown = keys.slice(0, 8).map((key) => `'${key}'`);
  return keys.length > 8 ? `${shown.join(', ')} and ${keys.length - 8} more` : shown.join(', ');
}
