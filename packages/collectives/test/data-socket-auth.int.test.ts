import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { authenticateSocket } from '../src/index.js';
import { connectPeers, PeerAcceptor } from '../src/internal/tcp/tcp-connections.js';

const secret = 'a'.repeat(64);
const options = (rank: number, overrides: Partial<{ secret: string; key: string }> = {}) => ({
  rank,
  size: 2,
  key: 'world',
  secret,
  host: '127.0.0.1',
  timeoutMs: 10_000,
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
      acceptor.server.close();
    }
  }, 30_000);
});
