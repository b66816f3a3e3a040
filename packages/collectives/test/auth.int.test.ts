import { once } from 'node:events';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { authenticateSocket, type SessionKeys } from '../src/auth/authenticate-socket.js';
import { generateJobSecret } from '../src/auth/job-secret.js';
import { CollectiveError } from '../src/errors.js';

const servers: Server[] = [];
const sockets: Socket[] = [];
afterEach(() => {
  for (const socket of sockets.splice(0)) socket.destroy();
  for (const server of servers.splice(0)) server.close();
});

/** A connected pair of sockets on loopback: [accepted (server side), connecting (client side)]. */
async function socketPair(): Promise<[Socket, Socket]> {
  const server = createServer();
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  const accepted = once(server, 'connection');
  const client = connect(address.port, '127.0.0.1');
  const [serverSide] = (await accepted) as [Socket];
  sockets.push(serverSide, client);
  return [serverSide, client];
}

async function outcome(promise: Promise<SessionKeys>): Promise<SessionKeys | CollectiveError> {
  return promise.catch((error: unknown) => {
    expect(error).toBeInstanceOf(CollectiveError);
    return error as CollectiveError;
  });
}

describe('authenticateSocket', () => {
  it('lets two holders of the secret in with mirrored, fresh session keys', async () => {
    const secret = generateJobSecret();
    expect(secret).toMatch(/^[0-9a-f]{64}$/);
    const [serverSide, clientSide] = await socketPair();
    const [serverKeys, clientKeys] = await Promise.all([
      authenticateSocket(serverSide, secret, 'server'),
      authenticateSocket(clientSide, secret, 'client'),
    ]);
    expect(serverKeys.sendKey.equals(clientKeys.receiveKey)).toBe(true);
    expect(serverKeys.receiveKey.equals(clientKeys.sendKey)).toBe(true);
    expect(serverKeys.sendKey.equals(serverKeys.receiveKey)).toBe(false);
    const [otherServer, otherClient] = await socketPair();
    const [again] = await Promise.all([
      authenticateSocket(otherServer, secret, 'server'),
      authenticateSocket(otherClient, secret, 'client'),
    ]);
    expect(again.sendKey.equals(serverKeys.sendKey)).toBe(false);
  });

  it('refuses a client with a different secret, on both sides', async () => {
    const [serverSide, clientSide] = await socketPair();
    const [serverResult, clientResult] = await Promise.all([
      outcome(authenticateSocket(serverSide, 'the-real-job-secret-1234', 'server')),
      outcome(authenticateSocket(clientSide, 'a-rogue-guessed-secret-99', 'client')),
    ]);
    expect(serverResult).toBeInstanceOf(CollectiveError);
    expect((serverResult as CollectiveError).code).toBe('auth');
    expect((clientResult as CollectiveError).message).toContain('refused');
  });

  it('refuses a server that cannot prove the secret (a squatter on the port)', async () => {
    const [serverSide, clientSide] = await socketPair();
    // The squatter replays a well-formed greeting, then answers "accepted" with a forged proof.
    serverSide.write(Buffer.concat([Buffer.from('FSDPAUTH'), Buffer.of(1), Buffer.alloc(32, 7)]));
    serverSide.on('data', () => serverSide.write(Buffer.concat([Buffer.of(1), Buffer.alloc(32, 9)])));
    const result = await outcome(authenticateSocket(clientSide, 'the-real-job-secret-1234', 'client'));
    expect((result as CollectiveError).message).toContain('did not prove');
  });

  it('rejects a peer that does not speak the protocol, and times out a silent one', async () => {
    const [serverSide, clientSide] = await socketPair();
    clientSide.write(Buffer.alloc(73, 0x41));
    const result = await outcome(authenticateSocket(serverSide, 'the-real-job-secret-1234', 'server'));
    expect((result as CollectiveError).message).toContain('did not speak the fsdp-ts handshake');
    const [silentServer] = await socketPair();
    const silent = await outcome(
      authenticateSocket(silentServer, 'the-real-job-secret-1234', 'server', { timeoutMs: 100 }),
    );
    expect((silent as CollectiveError).code).toBe('timeout');
  });

  it('leaves bytes that follow the handshake to the next reader; both sides derive the same keys', async () => {
    const secret = generateJobSecret();
    const [serverSide, clientSide] = await socketPair();
    const serverKeys = authenticateSocket(serverSide, secret, 'server').then((keys) => {
      // Written immediately after the handshake, likely in the same TCP segment as its end.
      serverSide.write(Buffer.from('first frame'));
      return keys;
    });
    const clientKeys = await authenticateSocket(clientSide, secret, 'client');
    const keys = await serverKeys;
    expect(clientKeys.sendKey.equals(keys.receiveKey)).toBe(true);
    expect(clientKeys.receiveKey.equals(keys.sendKey)).toBe(true);
    expect(clientKeys.sendKey.equals(clientKeys.receiveKey)).toBe(false);
    const received = await new Promise<Buffer>((resolve) => {
      let data = Buffer.alloc(0);
      const onData = (chunk: Buffer) => {
        data = Buffer.concat([data, chunk]);
        if (data.length >= 11) resolve(data);
      };
      clientSide.on('data', onData);
    });
    expect(received.toString()).toBe('first frame');
  });
});
