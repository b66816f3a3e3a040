import { createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Socket } from 'node:net';
import { CollectiveError } from '../errors.js';

/** Which end of the connection this process is: the side that accepted it is the `server`. */
export type HandshakeRole = 'server' | 'client';

/** Options of the job-secret handshake on one socket. */
export interface AuthenticateSocketOptions {
  /** Milliseconds for the whole handshake; default 10 000. */
  timeoutMs?: number;
}

/** Keys both sides derive from the job secret and both nonces; fresh for every connection. */
export interface SessionKeys {
  /** Key for what this side sends (32 bytes). */
  sendKey: Buffer;
  /** Key for what this side receives (32 bytes). */
  receiveKey: Buffer;
}

const MAGIC = Buffer.from('FSDPAUTH', 'latin1');
const VERSION = 1;
const NONCE_BYTES = 32;
const PROOF_BYTES = 32;
const ACCEPTED = 1;
const REFUSED = 0;

/**
 * HMAC-SHA256 challenge-response on a connected node:net socket: both sides prove they know the
 * job secret without sending it, and both derive per-connection session keys.
 *
 * [Note: handshake] (all messages fixed-size, lockstep, so no side reads past the handshake)
 *   server -> client: "FSDPAUTH" | version u8 | serverNonce[32]
 *   client -> server: "FSDPAUTH" | version u8 | clientNonce[32] | HMAC(k, "client" | sN | cN)
 *   server -> client: status u8 (1 accepted, 0 refused) | HMAC(k, "server" | sN | cN)
 * where k = HKDF-SHA256(secret). Distinct labels stop a proof being reflected back; fresh nonces
 * on both sides stop replays. The server closes the socket after a refusal; the client checks the
 * server's proof too, so a process squatting on the port without the secret cannot pose as the
 * store. Session keys: HKDF(k, salt sN | cN, "client-to-server" / "server-to-client").
 *
 * Resolves with the session keys once the peer is proven; rejects with a CollectiveError
 * (code 'auth', or 'timeout') otherwise, and then the caller must destroy the socket. The socket
 * is left paused, with any bytes after the handshake still buffered for the next reader.
 * Reusable for raw data sockets: call it on both ends before the first data byte.
 */
export async function authenticateSocket(
  socket: Socket,
  secret: string,
  role: HandshakeRole,
  options: AuthenticateSocketOptions = {},
): Promise<SessionKeys> {
  const deadline = Date.now() + (options.timeoutMs ?? 10_000);
  const key = deriveAuthenticationKey(secret);
  if (role === 'server') {
    const serverNonce = randomBytes(NONCE_BYTES);
    socket.write(Buffer.concat([MAGIC, Buffer.of(VERSION), serverNonce]));
    const hello = await readExactly(
      socket,
      MAGIC.length + 1 + NONCE_BYTES + PROOF_BYTES,
      deadline,
      'the client hello',
    );
    checkGreeting(hello, 'client');
    const clientNonce = hello.subarray(MAGIC.length + 1, MAGIC.length + 1 + NONCE_BYTES);
    const clientProof = hello.subarray(MAGIC.length + 1 + NONCE_BYTES);
    if (!timingSafeEqual(clientProof, proof(key, 'client', serverNonce, clientNonce))) {
      socket.end(Buffer.concat([Buffer.of(REFUSED), Buffer.alloc(PROOF_BYTES)]));
      throw refused('The connecting peer did not prove knowledge of the job secret; refused it.');
    }
    socket.write(Buffer.concat([Buffer.of(ACCEPTED), proof(key, 'server', serverNonce, clientNonce)]));
    return sessionKeys(key, serverNonce, clientNonce, role);
  }
  const greeting = await readExactly(socket, MAGIC.length + 1 + NONCE_BYTES, deadline, 'the server greeting');
  checkGreeting(greeting, 'server');
  const serverNonce = greeting.subarray(MAGIC.length + 1);
  const clientNonce = randomBytes(NONCE_BYTES);
  socket.write(
    Buffer.concat([MAGIC, Buffer.of(VERSION), clientNonce, proof(key, 'client', serverNonce, clientNonce)]),
  );
  const reply = await readExactly(socket, 1 + PROOF_BYTES, deadline, 'the server proof');
  if (reply[0] !== ACCEPTED) {
    throw refused('The server refused this process: it holds a different job secret.');
  }
  if (!timingSafeEqual(reply.subarray(1), proof(key, 'server', serverNonce, clientNonce))) {
    throw refused('The server did not prove knowledge of the job secret; it is not part of this job.');
  }
  return sessionKeys(key, serverNonce, clientNonce, role);
}

function deriveAuthenticationKey(secret: string): Buffer {
  return Buffer.from(
    hkdfSync('sha256', Buffer.from(secret, 'utf8'), 'fsdp-ts job secret', 'authentication', 32),
  );
}

function proof(key: Buffer, label: HandshakeRole, serverNonce: Buffer, clientNonce: Buffer): Buffer {
  return createHmac('sha256', key).update(label).update(serverNonce).update(clientNonce).digest();
}

function sessionKeys(
  key: Buffer,
  serverNonce: Buffer,
  clientNonce: Buffer,
  role: HandshakeRole,
): SessionKeys {
  const salt = Buffer.concat([serverNonce, clientNonce]);
  const clientToServer = Buffer.from(hkdfSync('sha256', key, salt, 'client-to-server', 32));
  const serverToClient = Buffer.from(hkdfSync('sha256', key, salt, 'server-to-client', 32));
  return role === 'server'
    ? { sendKey: serverToClient, receiveKey: clientToServer }
    : { sendKey: clientToServer, receiveKey: serverToClient };
}

function checkGreeting(message: Buffer, from: HandshakeRole): void {
  if (!message.subarray(0, MAGIC.length).equals(MAGIC) || message[MAGIC.length] !== VERSION) {
    throw refused(
      `The ${from} did not speak the fsdp-ts handshake (version ${VERSION}); got bytes ${message.subarray(0, 9).toString('hex')}.`,
    );
  }
}

function refused(message: string): CollectiveError {
  return new CollectiveError(message, {
    code: 'auth',
    fix: 'give every process of the job the same FSDP_JOB_SECRET (or FSDP_JOB_SECRET_FILE).',
  });
}

/**
 * Reads exactly `length` bytes from a socket and nothing more, failing at `deadline` (ms since
 * epoch) or when the connection ends first.
 *
 * [Note: exact reads] The handshake must not consume bytes that follow it (the first frame of
 * the protocol running over the socket). `socket.read(length)` in paused mode returns either
 * `length` bytes or null and leaves the rest buffered, so the next consumer sees every byte.
 */
export function readExactly(socket: Socket, length: number, deadline: number, what: string): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const finish = (error: Error | undefined, data?: Buffer) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.off('readable', onReadable);
      socket.off('end', onEnd);
      socket.off('close', onEnd);
      socket.off('error', onError);
      if (error !== undefined) reject(error);
      else resolve(data!);
    };
    const onReadable = () => {
      const data = socket.read(length) as Buffer | null;
      if (data !== null) {
        if (data.length === length) finish(undefined, data);
        else finish(closedError(what));
      }
    };
    const onEnd = () => finish(closedError(what));
    const onError = (cause: Error) =>
      finish(new CollectiveError(`Socket error while reading ${what}.`, { code: 'auth', cause }));
    const timer = setTimeout(
      () =>
        finish(
          new CollectiveError(`Timed out reading ${what}: the peer sent too little before the deadline.`, {
            code: 'timeout',
            fix: 'check that the peer runs fsdp-ts with the same protocol version and is not stalled.',
          }),
        ),
      Math.max(0, deadline - Date.now()),
    );
    socket.on('readable', onReadable);
    socket.on('end', onEnd);
    socket.on('close', onEnd);
    socket.on('error', onError);
    onReadable();
  });
}

function closedError(what: string): CollectiveError {
  return new CollectiveError(`The connection closed while reading ${what}.`, {
    code: 'auth',
    fix: 'the peer refused the connection or died; check that both sides use the same job secret.',
  });
}
