import { connect, createServer, type Socket } from 'node:net';
import { allocateShared, type ProcessGroup } from '../src/index.js';
import {
  abstractPath,
  type LocalTransport,
  localHostIdentity,
  localTransportSetting,
  newLocalName,
} from '../src/internal/tcp/tcp-connections.js';
import { median } from './internal/median.js';

export interface RawSocketResult {
  bytes: number;
  /** The transport of the raw connection: the one the tcp group's connections use. */
  transport: LocalTransport;
  /** GB/s per direction with both directions busy: median, min, max. */
  perDirection: { median: number; best: number; worst: number };
}

/** Counts every byte that arrives, from the start (nothing may be emitted to no listener). */
class ReceiveCounter {
  private received = 0;
  private waiter: { target: number; resolve: () => void } | undefined;

  constructor(socket: Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.received += chunk.length;
      if (this.waiter !== undefined && this.received >= this.waiter.target) {
        this.waiter.resolve();
        this.waiter = undefined;
      }
    });
  }

  until(target: number): Promise<void> {
    if (this.received >= target) return Promise.resolve();
    return new Promise((resolve) => {
      this.waiter = { target, resolve };
    });
  }
}

/** The transport the tcp group's ranks on this host use ([Note: local peer sockets]). */
export function groupTransport(rank: number): LocalTransport {
  return localTransportSetting(rank) === 'unix' && localHostIdentity() !== undefined ? 'unix' : 'tcp';
}

/**
 * The physical limit the tcp targets are measured against: ranks 0 and 1 of `group` (separate
 * processes) open a plain node:net connection over the transport the group's own connections use
 * (an abstract Unix-domain socket by default, TCP loopback with FSDP_TCP_LOCAL=tcp) and each
 * sends `bytes` to the other at the same time, on the main thread, with the data pre-allocated.
 */
export async function measureRawSocket(
  group: ProcessGroup,
  bytes: number,
  iterations: number,
  transport: LocalTransport = groupTransport(group.rank),
): Promise<RawSocketResult> {
  // Rank 0's TCP port, then the 12 random bytes of its abstract name (fsdp-ts-<24 hex>).
  const address = allocateShared(Int32Array, 4);
  const nameOf = () => `fsdp-ts-${Buffer.from(address.buffer, 4, 12).toString('hex')}`;
  let socket: Socket;
  if (group.rank === 0) {
    const server = createServer({ noDelay: true });
    Buffer.from(address.buffer, 4, 12).set(Buffer.from(newLocalName().slice(-24), 'hex'));
    await new Promise<void>((resolve) =>
      transport === 'unix'
        ? server.listen(abstractPath(nameOf()), resolve)
        : server.listen(0, '127.0.0.1', resolve),
    );
    const bound = server.address();
    address[0] = typeof bound === 'object' && bound !== null ? bound.port : 0;
    const accepted = new Promise<Socket>((resolve) => server.once('connection', resolve));
    await group.broadcast(address);
    socket = await accepted;
    server.close();
  } else {
    await group.broadcast(address);
    socket = await new Promise<Socket>((resolve) => {
      const client =
        transport === 'unix'
          ? connect({ path: abstractPath(nameOf()) }, () => resolve(client))
          : connect({ host: '127.0.0.1', port: address[0]!, noDelay: true }, () => resolve(client));
    });
  }
  const payload = Buffer.alloc(bytes, 7);
  const times: number[] = [];
  const counter = new ReceiveCounter(socket);
  for (let iteration = 0; iteration < iterations + 2; iteration++) {
    await group.barrier();
    const start = performance.now();
    const sent = new Promise<void>((resolve) => socket.write(payload, () => resolve()));
    await Promise.all([sent, counter.until((iteration + 1) * bytes)]);
    if (iteration >= 2) times.push(performance.now() - start);
  }
  socket.destroy();
  times.sort((a, b) => a - b);
  const rate = (ms: number) => bytes / (ms / 1000) / 1e9;
  return {
    bytes,
    transport,
    perDirection: {
      median: rate(median(times)),
      best: rate(times[0]!),
      worst: rate(times[times.length - 1]!),
    },
  };
}
