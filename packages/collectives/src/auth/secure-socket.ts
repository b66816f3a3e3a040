import { hkdfSync } from 'node:crypto';
import type { Socket } from 'node:net';
import {
  type ConnectionOptions,
  connect as connectTls,
  createServer as createTlsServer,
  type TLSSocket,
  type TlsOptions,
} from 'node:tls';
import { CollectiveError } from '../errors.js';
import type { HandshakeRole, SessionKeys } from './authenticate-socket.js';

/** The one cipher suite secure data links speak: TLS 1.2, pre-shared key, AES-256-GCM. */
export const SECURE_CIPHER = 'PSK-AES256-GCM-SHA384';

/**
 * [Note: secure data links] With `secure: true` (FSDP_SECURE=1, `fsdp-run --secure`) every tcp
 * data connection, once authenticateSocket has proven both ends, is wrapped in node:tls: TLS 1.2
 * with a pre-shared key and the PSK-AES256-GCM-SHA384 suite, so OpenSSL seals each record with
 * AES-256-GCM and checks it on arrival (sequence numbers in the MAC stop replay, reordering and
 * drops). The key is fresh per connection: HKDF-SHA256 of the handshake's two session keys
 * (themselves derived from the job secret and both nonces), so a recorded connection's key
 * opens no other. The PSK identity names the pair of ranks; it is not secret and the server
 * checks it only for equality. Chosen over AES-GCM framing in JavaScript by measurement
 * (architecture/decisions/2026-12-01-secure-data-path.md). Any TLS failure after the handshake
 * is an integrity failure: `isTlsFailure` lets the link report it with code `auth`.
 */
export function derivePresharedKey(keys: SessionKeys, role: HandshakeRole): Buffer {
  // Both ends must feed HKDF the same bytes: order the keys by direction, not by send/receive.
  const clientToServer = role === 'client' ? keys.sendKey : keys.receiveKey;
  const serverToClient = role === 'client' ? keys.receiveKey : keys.sendKey;
  return Buffer.from(
    hkdfSync('sha256', Buffer.concat([clientToServer, serverToClient]), 'fsdp-ts', 'tls-psk', 32),
  );
}

const COMMON = { ciphers: SECURE_CIPHER, minVersion: 'TLSv1.2', maxVersion: 'TLSv1.2' } as const;

/** The PSK identity of the store link (not secret; the server checks it for equality). */
const STORE_IDENTITY = 'fsdp-ts store';

/**
 * [Note: store link] The store link speaks the data links' TLS-PSK (one scheme for every
 * encrypted link): TLS 1.2, PSK-AES256-GCM-SHA384, key HKDF-SHA256(job secret, 'fsdp-ts',
 * 'store-psk'). The TLS handshake is the authentication: each side's Finished message is a MAC
 * under keys derived from the PSK and both hellos' fresh randoms, so a peer without the secret
 * fails it (the server logs a `tlsClientError`, the client gets an OpenSSL alert, code `auth`),
 * and the record keys are fresh per connection. Every record is then sealed with AES-256-GCM
 * with a sequence number, so store traffic can be neither read nor altered, replayed or
 * reordered (architecture/decisions/2026-12-02-link-security.md).
 */
export function storeTlsOptions(secret: string): {
  server: TlsOptions;
  client: (host: string, port: number) => ConnectionOptions;
} {
  const psk = Buffer.from(hkdfSync('sha256', Buffer.from(secret, 'utf8'), 'fsdp-ts', 'store-psk', 32));
  return {
    server: { ...COMMON, pskCallback: (_socket, identity) => (identity === STORE_IDENTITY ? psk : null) },
    client: (host, port) => ({
      ...COMMON,
      host,
      port,
      pskCallback: () => ({ psk, identity: STORE_IDENTITY }),
      checkServerIdentity: () => undefined,
    }),
  };
}

export interface SecureSocketOptions {
  keys: SessionKeys;
  role: HandshakeRole;
  /** Names the connection, e.g. `rank 3 -> rank 1`; both ends pass the same string. */
  identity: string;
  deadline: number;
}

/**
 * Wraps an authenticated socket whose read buffer is empty (no peer byte may be waiting: the
 * TLS layer takes over the socket's handle and would never see it) and resolves once the TLS
 * handshake is done. Rejects with code `auth` when the peer's key differs, `timeout` after the
 * deadline. The accepting side goes through a tls.Server of its own (fed the socket with its
 * 'connection' event, never listening): a TLSSocket made by hand on the server side reports
 * record failures only through an internal event, while a server's sockets emit 'error' as
 * clients' do.
 */
export function secureSocket(socket: Socket, options: SecureSocketOptions): Promise<TLSSocket> {
  const { identity } = options;
  const psk = derivePresharedKey(options.keys, options.role);
  const failed = (cause: Error) =>
    new CollectiveError(`The TLS handshake of ${identity} failed: ${cause.message}`, {
      code: 'auth',
      cause,
      fix: 'give every rank the same job secret and the same FSDP_SECURE setting.',
    });
  return new Promise((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    const finish = (error: CollectiveError | undefined, secured: TLSSocket) => {
      clearTimeout(timer);
      detach();
      if (error !== undefined) {
        secured.destroy();
        reject(error);
      } else {
        secured.pause();
        resolve(secured);
      }
    };
    let detach: () => void;
    let pending: TLSSocket | undefined;
    if (options.role === 'server') {
      const server = createTlsServer({
        ...COMMON,
        pskCallback: (_socket, offered) => (offered === identity ? psk : null),
      });
      detach = () => server.removeAllListeners();
      server.once('secureConnection', (secured: TLSSocket) => finish(undefined, secured));
      server.once('tlsClientError', (cause: Error, secured: TLSSocket) => finish(failed(cause), secured));
      server.emit('connection', socket);
    } else {
      const secured = connectTls({
        ...COMMON,
        socket,
        pskCallback: () => ({ psk, identity }),
        checkServerIdentity: () => undefined,
      });
      pending = secured;
      const onError = (cause: Error) => finish(failed(cause), secured);
      const onClose = () =>
        finish(
          new CollectiveError(`The peer closed ${identity} during the TLS handshake.`, {
            code: 'auth',
            fix: 'give every rank the same FSDP_SECURE setting (fsdp-run --secure sets it for all).',
          }),
          secured,
        );
      const onSecure = () => finish(undefined, secured);
      detach = () => {
        secured.off('error', onError);
        secured.off('close', onClose);
        secured.off('secureConnect', onSecure);
      };
      secured.once('error', onError);
      secured.once('close', onClose);
      secured.once('secureConnect', onSecure);
    }
    timer = setTimeout(
      () => {
        const error = new CollectiveError(`The TLS handshake of ${identity} did not finish in time.`, {
          code: 'timeout',
          fix: 'check that every rank runs with the same FSDP_SECURE setting.',
        });
        socket.destroy();
        detach();
        pending?.destroy();
        reject(error);
      },
      Math.max(1, options.deadline - Date.now()),
    );
  });
}

/** Whether a socket error is OpenSSL rejecting a record (altered, injected or out of order). */
export function isTlsFailure(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return (
    (typeof code === 'string' && code.startsWith('ERR_SSL_')) ||
    (error as { library?: unknown } | null)?.library === 'SSL routines'
  );
}
