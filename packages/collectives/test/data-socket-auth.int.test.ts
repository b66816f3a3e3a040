import { connect } from 'node:net';
import { TLSSocket } from 'node:tls';
import { describe, expect, it } from 'vitest';
import { authenticateSocket } from '../src/auth/authenticate-socket.js';
import {
  abstractPath,
  connectPeers,
  formatEndpoint,
  localHostIdentity,
  newLocalName,
  PeerAcceptor,
} from '../src/internal/tcp/tcp-connections.js';

const secret = 'a'.repeat(64);
const options = (
  rank: number,
  overrides: Partial<{
    secret: string;
    key: string;
    secure: boolean;
    timeoutMs: number;
    localName: string;
    localIdentity: string;
  }> = {},
) => ({
  rank,
  size: 2,
  key: 'world',
  secret,
  host: '127.0.0.1',
  timeoutMs: 10_000,
  secure: false,
  ...overrides,
});

describe('tcp data sockets', () => {
  it('refuse a client with a wrong secret or a foreign group, then admit the real peer', async () => {
    const acceptor = await PeerAcceptor.listen(options(0));
    const endpoint = `127.0.0.1:${acceptor.port()}`;
    try {
      // A rogue process without the secret: the handshake fails and the connection is dropped.
      const rogue = connect({ host: '127.0.0.1', port: acceptor.port() });
      await new Promise((resolve) => rogue.once('connect', resolve));
      await expect(
        authenticateSocket(rogue, 'b'.repeat(64), 'client', { timeoutMs: 5_000 }),
      ).rejects.toMatchObject({
        code: 'auth',
      });
      rogue.destroy();
      // A process with the secret but another group's key is dropped after naming itself.
      const foreign = await connectPeers([endpoint], options(1, { key: 'other' }));
      const foreignSocket = [...foreign.values()][0]!;
      await new Promise((resolve) => foreignSocket.once('close', resolve));
      // The real peer gets in, and only it.
      const accepted = acceptor.all();
      const connected = await connectPeers([endpoint], options(1));
      const peers = await accepted;
      expect([...peers.keys()]).toEqual([1]);
      expect(connected.size).toBe(1);
      const payload = Buffer.from('hello rank 0');
      connected.get(0)!.write(payload);
      const socket = peers.get(1)!;
      const received = await new Promise<Buffer>((resolve) => socket.once('data', resolve));
      expect(received.toString()).toBe('hello rank 0');
      for (const each of [...peers.values(), ...connected.values()]) each.destroy();
    } finally {
      acceptor.close();
    }
  }, 30_000);

  it('secure: TLS carries the bytes sealed, and a plain rank and a secure one refuse each other', async () => {
    const acceptor = await PeerAcceptor.listen(options(0, { secure: true }));
    const endpoint = `127.0.0.1:${acceptor.port()}`;
    try {
      // A plain rank of the same job is dropped after naming itself (another identity magic).
      const plain = await connectPeers([endpoint], options(1));
      const plainSocket = [...plain.values()][0]!;
      await new Promise((resolve) => plainSocket.once('close', resolve));
      const accepted = acceptor.all();
      const connected = await connectPeers([endpoint], options(1, { secure: true }));
      const peers = await accepted;
      const client = connected.get(0)! as TLSSocket;
      const server = peers.get(1)! as TLSSocket;
      expect(client).toBeInstanceOf(TLSSocket);
      expect(client.getCipher().standardName).toBe('TLS_PSK_WITH_AES_256_GCM_SHA384');
      expect(server.getProtocol()).toBe('TLSv1.2');
      client.write(Buffer.from('hello rank 0'));
      server.resume();
      const received = await new Promise<Buffer>((resolve) => server.once('data', resolve));
      expect(received.toString()).toBe('hello rank 0');
      for (const each of [server, client]) each.destroy();
    } finally {
      acceptor.close();
    }
    // A secure rank meeting a plain one fails at once with 'auth' and says what to align.
    const plainAcceptor = await PeerAcceptor.listen(options(0));
    try {
      await expect(
        connectPeers([`127.0.0.1:${plainAcceptor.port()}`], options(1, { secure: true })),
      ).rejects.toMatchObject({ code: 'auth', message: expect.stringMatching(/without secure transport/) });
    } finally {
      plainAcceptor.close();
    }
  }, 30_000);

  // [Note: local peer sockets]: the abstract socket admits exactly what the TCP port admits.
  it.runIf(localHostIdentity() !== undefined)(
    'local socket: the handshake guards it, TLS runs over it, and peers reach it only with the same host identity',
    async () => {
      const localIdentity = localHostIdentity()!;
      const localName = newLocalName();
      const acceptor = await PeerAcceptor.listen(options(0, { secure: true, localName, localIdentity }));
      expect(acceptor.localName()).toBe(localName);
      const endpoint = formatEndpoint(`127.0.0.1:${acceptor.port()}`, {
        name: localName,
        identity: localIdentity,
      });
      try {
        // A rogue process without the secret, on the abstract socket: refused.
        const rogue = connect({ path: abstractPath(localName) });
        await new Promise((resolve) => rogue.once('connect', resolve));
        await expect(
          authenticateSocket(rogue, 'b'.repeat(64), 'client', { timeoutMs: 5_000 }),
        ).rejects.toMatchObject({ code: 'auth' });
        rogue.destroy();
        // Another host identity: the local name is ignored and the peer connects over TCP.
        const accepted = acceptor.all();
        const remote = await connectPeers([endpoint], options(1, { secure: true, localIdentity: 'other/1' }));
        const remoteServer = (await accepted).get(1)! as TLSSocket;
        const remoteClient = remote.get(0)! as TLSSocket;
        expect(remoteClient.remoteFamily).toBe('IPv4');
        remoteServer.destroy();
        remoteClient.destroy();
      } finally {
        acceptor.close();
      }
      // The same identity: TLS over the Unix-domain socket carries the bytes.
      const second = await PeerAcceptor.listen(
        options(0, { secure: true, localName: newLocalName(), localIdentity }),
      );
      try {
        const accepted = second.all();
        const connected = await connectPeers(
          [
            formatEndpoint(`127.0.0.1:${second.port()}`, {
              name: second.localName()!,
              identity: localIdentity,
            }),
          ],
          options(1, { secure: true, localIdentity }),
        );
        const server = (await accepted).get(1)! as TLSSocket;
        const client = connected.get(0)! as TLSSocket;
        expect(client).toBeInstanceOf(TLSSocket);
        // A TLS socket over a pipe has no IP family; over TCP it would say IPv4.
        expect(client.remoteFamily).toBeUndefined();
        expect(server.remoteFamily).toBeUndefined();
        client.write(Buffer.from('hello over unix'));
        server.resume();
        const received = await new Promise<Buffer>((resolve) => server.once('data', resolve));
        expect(received.toString()).toBe('hello over unix');
        for (const each of [server, client]) each.destroy();
      } finally {
        second.close();
      }
    },
    30_000,
  );
});
