import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { connect as connectTls, type TLSSocket } from 'node:tls';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { storeTlsOptions } from '../src/auth/secure-socket.js';
import { readEnvironment } from '../src/environment/read-environment.js';
import { CollectiveError } from '../src/errors.js';
import { openRendezvousStore } from '../src/store/open-rendezvous-store.js';
import { connectStore, type StoreClient } from '../src/store/store-client.js';
import { frame } from '../src/store/store-protocol.js';
import { type StoreServer, startStoreServer } from '../src/store/store-server.js';

const SECRET = 'store-test-secret-0123456789';
const text = (bytes: Uint8Array) => Buffer.from(bytes).toString('utf8');
const cleanups: (() => Promise<unknown>)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function server(errors: unknown[] = []): Promise<StoreServer> {
  const started = await startStoreServer({
    secret: SECRET,
    onConnectionError: (error) => errors.push(error),
  });
  cleanups.push(() => started.close());
  return started;
}

async function client(store: StoreServer, timeoutMs = 5_000): Promise<StoreClient> {
  const connected = await connectStore({ host: store.host, port: store.port, secret: SECRET, timeoutMs });
  cleanups.push(() => connected.close());
  return connected;
}

function rawSocket(store: StoreServer): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: store.host, port: store.port }, () => resolve(socket));
    socket.on('error', reject);
    cleanups.push(async () => socket.destroy());
  });
}

/** A connection that passed the store's TLS-PSK handshake, for writing raw frames. */
function tlsSocket(store: StoreServer): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    const socket = connectTls(storeTlsOptions(SECRET).client(store.host, store.port), () => resolve(socket));
    socket.on('error', reject);
    cleanups.push(async () => socket.destroy());
  });
}

/** Resolves when the server has closed the socket (reading and dropping what it sent). */
function closed(socket: Socket): Promise<void> {
  socket.resume();
  return new Promise((resolve) => (socket.destroyed ? resolve() : socket.once('close', () => resolve())));
}

describe('Store', () => {
  it('binds loopback by default and refuses a wildcard unless asked', async () => {
    const store = await server();
    expect(store.host).toBe('127.0.0.1');
    expect(store.port).toBeGreaterThan(0);
    await expect(startStoreServer({ secret: SECRET, host: '0.0.0.0' })).rejects.toThrow(/wildcard/);
  });

  it('sets, gets, checks and deletes', async () => {
    const store = await client(await server());
    await store.set('a', 'alpha');
    await store.set('b', Uint8Array.of(0, 255));
    expect(text(await store.get('a'))).toBe('alpha');
    expect([...(await store.get('b'))]).toEqual([0, 255]);
    expect(await store.check(['a', 'b'])).toBe(true);
    expect(await store.delete('a')).toBe(true);
    expect(await store.delete('a')).toBe(false);
    expect(await store.check(['a', 'b'])).toBe(false);
  });

  it('get waits for a later set from another client, and times out naming the key', async () => {
    const started = await server();
    const [reader, writer] = await Promise.all([client(started), client(started)]);
    const pending = reader.get('late');
    const waited = reader.wait(['late', 'later']);
    await writer.set('late', 'value');
    expect(text(await pending)).toBe('value');
    await writer.set('later', 'x');
    await waited;
    const before = Date.now();
    const error = await reader.get('never', { timeoutMs: 200 }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(CollectiveError);
    expect((error as CollectiveError).code).toBe('timeout');
    expect((error as CollectiveError).message).toContain("'never'");
    expect(Date.now() - before).toBeGreaterThanOrEqual(190);
    await expect(reader.wait(['late', 'missing'], { timeoutMs: 100 })).rejects.toThrow(/'missing'/);
  });

  it('compareSet swaps only on a match; empty expected means absent', async () => {
    const store = await client(await server());
    expect(text(await store.compareSet('k', '', 'first'))).toBe('first');
    expect(text(await store.compareSet('k', '', 'second'))).toBe('first');
    expect(text(await store.compareSet('k', 'wrong', 'third'))).toBe('first');
    expect(text(await store.compareSet('k', 'first', 'fourth'))).toBe('fourth');
    expect((await store.compareSet('absent', 'x', 'y')).length).toBe(0);
  });

  it('adds atomically from several clients at once', async () => {
    const started = await server();
    const clients = await Promise.all([0, 1, 2, 3].map(() => client(started)));
    const results = await Promise.all(
      clients.flatMap((each, index) => Array.from({ length: 25 }, () => each.add('counter', index + 1))),
    );
    const total = 25 * (1 + 2 + 3 + 4);
    expect(Math.max(...results)).toBe(total);
    expect(new Set(results).size).toBe(results.length);
    expect(text(await clients[0]!.get('counter'))).toBe(String(total));
    await clients[0]!.set('text', 'abc');
    await expect(clients[0]!.add('text', 1)).rejects.toThrow(/not an integer/);
  });

  it('isolates prefixes and sets keys when a client disconnects', async () => {
    const started = await server();
    const [first, second] = await Promise.all([client(started), client(started)]);
    const prefixed = await connectStore({
      host: started.host,
      port: started.port,
      secret: SECRET,
      prefix: 'attempt-1/',
    });
    cleanups.push(() => prefixed.close());
    await prefixed.set('x', '1');
    expect(await first.check(['x'])).toBe(false);
    expect(text(await first.get('attempt-1/x'))).toBe('1');
    await second.setOnDisconnect('gone', 'second left');
    await second.close();
    expect(text(await first.get('gone'))).toBe('second left');
  });

  it('fails pending requests when the server goes away', async () => {
    const started = await startStoreServer({ secret: SECRET });
    const store = await client(started);
    const lost = new Promise<CollectiveError>((resolve) => store.onConnectionLost(resolve));
    const pending = store.get('never');
    await started.close();
    await expect(pending).rejects.toThrow(/Lost the connection to the store/);
    expect((await lost).code).toBe('store');
  });

  it('refuses a client with the wrong secret and keeps serving the right one', async () => {
    const errors: unknown[] = [];
    const started = await server(errors);
    const good = await client(started);
    const refused = await connectStore({
      host: started.host,
      port: started.port,
      secret: 'not-the-job-secret-000000',
      timeoutMs: 2_000,
    }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(CollectiveError);
    expect((refused as CollectiveError).code).toBe('auth');
    expect((refused as CollectiveError).message).toContain('The server refused this process');
    await good.set('still', 'serving');
    expect(text(await good.get('still'))).toBe('serving');
    expect(errors.some((error) => (error as CollectiveError).code === 'auth')).toBe(true);
  });

  it('survives garbage before and after the handshake and answers a good client', async () => {
    const errors: unknown[] = [];
    const started = await server(errors);
    const good = await client(started);
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ minLength: 1, maxLength: 300 }), async (garbage) => {
        const socket = await rawSocket(started);
        socket.end(Buffer.concat([garbage, randomBytes(73)]));
        await closed(socket);
      }),
      { numRuns: 15 },
    );
    // Authenticated peers sending random frames, truncated frames and oversized lengths.
    const payloads = [randomBytes(40), Buffer.from([0xff, 0xff, 0xff, 0xff]), Buffer.from([0, 0, 0, 9, 1])];
    for (const payload of payloads) {
      const socket = await tlsSocket(started);
      socket.write(payload);
      socket.end();
      await closed(socket);
    }
    // A well-formed frame holding a malformed request.
    const sealed = await tlsSocket(started);
    sealed.write(frame(Buffer.from([99, 0, 0, 0, 1])));
    await closed(sealed);
    expect(errors.some((error) => (error as CollectiveError).code === 'malformed-frame')).toBe(true);
    await good.set('after', 'garbage');
    expect(text(await good.get('after'))).toBe('garbage');
    const fresh = await client(started);
    expect(text(await fresh.get('after'))).toBe('garbage');
  });

  it('retries until the server is up, then times out clearly when none comes', async () => {
    const probe = await startStoreServer({ secret: SECRET });
    const port = probe.port;
    await probe.close();
    const connecting = connectStore({ host: '127.0.0.1', port, secret: SECRET, timeoutMs: 5_000 });
    const late = await startStoreServer({ secret: SECRET, port });
    cleanups.push(() => late.close());
    const store = await connecting;
    cleanups.push(() => store.close());
    await store.set('k', 'v');
    await late.close();
    await expect(connectStore({ host: '127.0.0.1', port, secret: SECRET, timeoutMs: 300 })).rejects.toThrow(
      /Could not reach the store/,
    );
  });

  it('opens the env:// rendezvous: rank 0 starts the store unless a launcher runs one', async () => {
    const probe = await startStoreServer({ secret: SECRET });
    const port = probe.port;
    await probe.close();
    const env = (rank: number, extra: NodeJS.ProcessEnv = {}) =>
      readEnvironment({
        RANK: String(rank),
        WORLD_SIZE: '2',
        MASTER_ADDR: '127.0.0.1',
        MASTER_PORT: String(port),
        FSDP_JOB_SECRET: SECRET,
        FSDP_STORE_PREFIX: 'attempt-3/',
        ...extra,
      });
    const [zero, one] = await Promise.all([openRendezvousStore(env(0)), openRendezvousStore(env(1))]);
    expect(zero.server?.port).toBe(port);
    expect(one.server).toBeUndefined();
    await one.store.set('endpoint', 'tcp://somewhere');
    expect(text(await zero.store.get('endpoint'))).toBe('tcp://somewhere');
    // Under a launcher (FSDP_AGENT_STORE=1) rank 0 only connects: to the server started above.
    const agent = await openRendezvousStore(env(0, { FSDP_AGENT_STORE: '1', FSDP_STORE_PREFIX: '' }));
    expect(agent.server).toBeUndefined();
    expect(text(await agent.store.get('attempt-3/endpoint'))).toBe('tcp://somewhere');
    await agent.close();
    await one.close();
    await zero.close();
  });
});
