import type { Socket } from 'node:net';
import { createServer, type Server, type TLSSocket } from 'node:tls';
import { validateJobSecret } from '../auth/job-secret.js';
import { storeTlsOptions } from '../auth/secure-socket.js';
import { CollectiveError } from '../errors.js';
import { StoreState } from './internal/store-state.js';
import {
  decodeStoreRequest,
  encodeStoreResponse,
  FrameDecoder,
  frame,
  STORE_LIMITS,
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
  /** Connections that completed the handshake and are still open. */
  readonly connectionCount: number;
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
    delete(key: string): void;
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
  let authenticated = 0;
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
    const client = state.connect((response: StoreResponse) => {
      if (!socket.destroyed) socket.write(frame(encodeStoreResponse(response)));
    });
    authenticated++;
    socket.on('close', () => {
      authenticated--;
      state.disconnect(client);
    });
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
      set: (key, value) => state.put(key, typeof value === 'string' ? Buffer.from(value, 'utf8') : value),
      delete: (key) => state.erase(key),
      watch: (prefix, listener) => state.watch(prefix, listener),
    },
    get connectionCount() {
      return authenticated;
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
