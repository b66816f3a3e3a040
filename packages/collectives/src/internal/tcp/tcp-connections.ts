import { randomBytes } from 'node:crypto';
import { readFileSync, readlinkSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { authenticateSocket, readExactly, type SessionKeys } from '../../auth/authenticate-socket.js';
import { secureSocket } from '../../auth/secure-socket.js';
import { CollectiveError } from '../../errors.js';
import type { TcpInit } from './tcp-backend.js';

/**
 * [Note: tcp mesh] One connection per pair of ranks, both directions: rank i connects to every
 * lower rank and accepts every higher one. Each runs the job-secret handshake
 * (authenticateSocket), then the connecting side names itself in 12 bytes (magic, rank, a hash of
 * the group key); a connection failing either is dropped and the server keeps listening. With
 * `secure` ([Note: secure data links]) the identity has another magic, the accepting side answers
 * it with one byte, and only then do both wrap the socket in TLS (so no TLS byte arrives while
 * the plain socket owns its read buffer).
 */
const IDENTITY_MAGIC = 0x44495346;
const SECURE_IDENTITY_MAGIC = 0x53495346;
const IDENTITY_BYTES = 12;
const IDENTITY_ACCEPTED = 0x01;

export function groupKeyHash(key: string): number {
  let hash = 0x811c9dc5;
  for (let index = 0; index < key.length; index++)
    hash = Math.imul(hash ^ key.charCodeAt(index), 0x01000193) >>> 0;
  return hash;
}

/** What forming the mesh needs of a tcp engine's init (TcpInit). */
export type MeshOptions = Pick<
  TcpInit,
  | 'rank'
  | 'size'
  | 'key'
  | 'secret'
  | 'host'
  | 'timeoutMs'
  | 'secure'
  | 'localName'
  | 'localIdentity'
  | 'counters'
>;

function identityMagic(options: MeshOptions): number {
  return options.secure ? SECURE_IDENTITY_MAGIC : IDENTITY_MAGIC;
}

/** The PSK identity of the connection from rank `higher` to rank `lower` of the group. */
function linkIdentity(options: MeshOptions, higher: number, lower: number): string {
  return `fsdp-ts ${groupKeyHash(options.key).toString(16)} rank ${higher} -> rank ${lower}`;
}

/** Accepts and authenticates the higher ranks' connections from the engine's start (before the endpoints are known). */
export class PeerAcceptor {
  private readonly accepted = new Map<number, Socket>();
  private readonly expected: number;
  private waiter: (() => void) | undefined;

  private constructor(
    private readonly server: Server,
    private readonly localServer: Server | undefined,
    private readonly options: MeshOptions,
  ) {
    this.expected = options.size - 1 - options.rank;
    server.on('connection', (socket) => this.admit(socket, 'tcp'));
    localServer?.on('connection', (socket) => this.admit(socket, 'unix'));
  }

  /** TCP at `options.host`, and the abstract socket `options.localName` when it can listen. */
  static async listen(options: MeshOptions): Promise<PeerAcceptor> {
    const server = await listening(createServer({ noDelay: true }), (server) =>
      server.listen(0, options.host),
    );
    let localServer: Server | undefined;
    if (options.localName !== undefined) {
      localServer = await listening(createServer(), (server) =>
        server.listen(abstractPath(options.localName!)),
      ).catch(() => undefined);
    }
    return new PeerAcceptor(server, localServer, options);
  }

  port(): number {
    const address = this.server.address();
    return typeof address === 'object' && address !== null ? address.port : 0;
  }

  localName(): string | undefined {
    return this.localServer === undefined ? undefined : this.options.localName;
  }

  close(): void {
    this.server.close();
    this.localServer?.close();
  }

  all(): Promise<Map<number, Socket>> {
    const { rank, timeoutMs } = this.options;
    if (this.accepted.size === this.expected) return Promise.resolve(this.accepted);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiter = undefined;
        reject(
          new CollectiveError(
            `Rank ${rank} accepted ${this.accepted.size} of ${this.expected} peer connections within ${timeoutMs} ms.`,
            {
              code: 'timeout',
              rank,
              fix: 'check that every rank started and that the data address is reachable from the others (FSDP_SOCKET_ADDR), and that every rank has the same FSDP_SECURE setting.',
            },
          ),
        );
      }, timeoutMs);
      this.waiter = () => {
        clearTimeout(timer);
        resolve(this.accepted);
      };
    });
  }

  private admit(socket: Socket, transport: LocalTransport): void {
    const options = this.options;
    const deadline = Date.now() + options.timeoutMs;
    socket.on('error', () => undefined);
    void (async () => {
      try {
        const keys = await authenticateSocket(socket, options.secret, 'server', {
          timeoutMs: Math.max(1, deadline - Date.now()),
        });
        const identity = await readExactly(socket, IDENTITY_BYTES, deadline, 'the peer identity');
        const peer = identity.readUInt32LE(4);
        const valid =
          identity.readUInt32LE(0) === identityMagic(options) &&
          identity.readUInt32LE(8) === groupKeyHash(options.key) &&
          peer > options.rank &&
          peer < options.size &&
          !this.accepted.has(peer);
        if (!valid) throw new Error('bad identity');
        let link: Socket = socket;
        if (options.secure) {
          socket.write(Buffer.of(IDENTITY_ACCEPTED));
          link = await secureSocket(socket, {
            keys,
            role: 'server',
            identity: linkIdentity(options, peer, options.rank),
            deadline,
          });
        }
        if (this.accepted.has(peer)) throw new Error('duplicate peer');
        this.accepted.set(peer, link);
        count(options.counters, transport === 'unix' ? COUNTER.unixLinks : COUNTER.tcpLinks);
        if (this.accepted.size === this.expected) this.waiter?.();
      } catch {
        socket.destroy();
      }
    })();
  }
}

export async function connectPeers(
  endpoints: readonly string[],
  options: MeshOptions,
): Promise<Map<number, Socket>> {
  const sockets = new Map<number, Socket>();
  const deadline = Date.now() + options.timeoutMs;
  await Promise.all(
    endpoints.slice(0, options.rank).map(async (endpoint, peer) => {
      const target = parseEndpoint(endpoint);
      let socket: Socket | undefined;
      if (target.local !== undefined && target.local.identity === options.localIdentity) {
        // Same host and network namespace: the peer's abstract socket; TCP if that fails.
        socket = await connected(connect({ path: abstractPath(target.local.name) })).catch(() => undefined);
      }
      const transport: LocalTransport = socket === undefined ? 'tcp' : 'unix';
      socket ??= await connected(connect({ host: target.host, port: target.port, noDelay: true })).catch(
        (cause: Error) => {
          throw new CollectiveError(
            `Rank ${options.rank} cannot connect to rank ${peer} at ${target.host}:${target.port}: ${cause.message}`,
            {
              code: 'peer-lost',
              rank: options.rank,
              peer,
              cause,
              fix: 'check that the peer is alive and its data address is reachable.',
            },
          );
        },
      );
      const keys = await authenticateSocket(socket, options.secret, 'client', {
        timeoutMs: Math.max(1, deadline - Date.now()),
      });
      const identity = Buffer.alloc(IDENTITY_BYTES);
      identity.writeUInt32LE(identityMagic(options), 0);
      identity.writeUInt32LE(options.rank, 4);
      identity.writeUInt32LE(groupKeyHash(options.key), 8);
      socket.write(identity);
      sockets.set(peer, options.secure ? await secureClient(socket, keys, options, peer, deadline) : socket);
      count(options.counters, transport === 'unix' ? COUNTER.unixLinks : COUNTER.tcpLinks);
    }),
  );
  return sockets;
}

/** `socket` once connected, or its first error (the listener stays: a later error fails that step, not the process). */
function connected(socket: Socket): Promise<Socket> {
  return new Promise((resolve, reject) => {
    socket.once('error', reject);
    socket.once('connect', () => resolve(socket));
  });
}

function listening(server: Server, listen: (server: Server) => void): Promise<Server> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.once('listening', () => {
      server.off('error', reject);
      resolve(server);
    });
    listen(server);
  });
}

/** The client half of [Note: secure data links]: waits for the identity's answer, then TLS. */
async function secureClient(
  socket: Socket,
  keys: SessionKeys,
  options: MeshOptions,
  peer: number,
  deadline: number,
): Promise<Socket> {
  try {
    await readExactly(socket, 1, deadline, `rank ${peer}'s answer to this rank's identity`);
  } catch (cause) {
    socket.destroy();
    throw new CollectiveError(
      `Rank ${peer} refused the secure connection of rank ${options.rank}: it runs without secure transport or in another group.`,
      {
        code: 'auth',
        rank: options.rank,
        peer,
        cause,
        fix: 'give every rank the same FSDP_SECURE setting (fsdp-run --secure sets it for all workers).',
      },
    );
  }
  return secureSocket(socket, {
    keys,
    role: 'client',
    identity: linkIdentity(options, options.rank, peer),
    deadline,
  });
}

/**
 * [Note: local peer sockets]
 * Ranks on one host reach each other over a Unix-domain stream socket instead of TCP loopback
 * (same bytes, about half the kernel's work: decisions/2026-11-30-collectives-data-path.md). Each rank (Linux,
 * FSDP_TCP_LOCAL unset or `unix`) also listens on an abstract socket `\0fsdp-ts-<hex>`, whose
 * reach is 127.0.0.1's, so the handshake of [Note: tcp mesh] protects it unchanged; it publishes
 * `host:port unix=<name>@<host identity>` (boot id and network namespace, so simulated hosts in
 * other namespaces keep TCP). A peer with the same identity tries the abstract socket and falls
 * back to TCP on any error. Everything above the socket (TLS, the native path, loss attribution)
 * is the same on both kinds.
 */
export type LocalTransport = 'unix' | 'tcp';

export function localTransportSetting(rank: number): LocalTransport {
  const value = process.env.FSDP_TCP_LOCAL;
  if (value === undefined || value === '' || value === 'unix') return 'unix';
  if (value === 'tcp') return 'tcp';
  throw new CollectiveError(`FSDP_TCP_LOCAL is '${value}'; expected unix, tcp or unset.`, {
    code: 'invalid-argument',
    rank,
    expected: "'unix', 'tcp' or unset",
    actual: value,
    fix: 'unset FSDP_TCP_LOCAL (or set it to unix) to connect ranks on the same host over a Unix-domain socket, or set it to tcp to use TCP for every connection.',
  });
}

/** Boot id and network namespace inode; undefined off Linux or when /proc does not say. */
export function localHostIdentity(): string | undefined {
  if (process.platform !== 'linux') return undefined;
  try {
    const boot = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    const namespace = /\[(\d+)\]/.exec(readlinkSync('/proc/self/ns/net'))?.[1];
    if (!/^[0-9a-f-]+$/.test(boot) || namespace === undefined) return undefined;
    return `${boot}/${namespace}`;
  } catch {
    return undefined;
  }
}

export function newLocalName(): string {
  return `fsdp-ts-${randomBytes(12).toString('hex')}`;
}

export function abstractPath(name: string): string {
  return `\0${name}`;
}

export interface PeerEndpoint {
  host: string;
  port: number;
  local?: { name: string; identity: string };
}

/** `host:port`, then ` unix=<name>@<identity>` when the rank listens locally too (parseEndpoint reads it). */
export function formatEndpoint(
  hostPort: string,
  local: { name: string; identity: string } | undefined,
): string {
  return local === undefined ? hostPort : `${hostPort} unix=${local.name}@${local.identity}`;
}

export function parseEndpoint(endpoint: string): PeerEndpoint {
  const [hostPort = '', ...fields] = endpoint.split(' ');
  const separator = hostPort.lastIndexOf(':');
  const parsed: PeerEndpoint = {
    host: hostPort.slice(0, separator).replace(/^\[|\]$/g, ''),
    port: Number(hostPort.slice(separator + 1)),
  };
  for (const field of fields) {
    const match = /^unix=([^@]+)@(.+)$/.exec(field);
    if (match !== null) parsed.local = { name: match[1]!, identity: match[2]! };
  }
  return parsed;
}

/**
 * Per-process tcp diagnostics, not API: one SharedArrayBuffer the main thread posts to every tcp
 * communication worker, which add to it; tests read it to see which path and transport ran. The
 * reduce steps' counts come first: NativeReduce.counts may be their two slots alone.
 */
export const COUNTER = {
  blasSteps: 0,
  simdSteps: 1,
  headerExchanges: 2,
  headerMismatches: 3,
  unixLinks: 4,
  tcpLinks: 5,
  smallestSendBuffer: 6,
  largestSendBuffer: 7,
} as const;
let counters: Int32Array | undefined;

export function tcpCounters(): Int32Array {
  counters ??= new Int32Array(new SharedArrayBuffer(4 * Object.keys(COUNTER).length));
  return counters;
}

export function count(buffer: Int32Array | undefined, slot: number): void {
  if (buffer !== undefined) Atomics.add(buffer, slot, 1);
}

/** Test hook: this process's connections over a Unix-domain socket, and over TCP. */
export function localLinkCounts(): { unix: number; tcp: number } {
  const buffer = tcpCounters();
  return { unix: Atomics.load(buffer, COUNTER.unixLinks), tcp: Atomics.load(buffer, COUNTER.tcpLinks) };
}

/**
 * Test hook (internal): when set, this process publishes this abstract name instead of the one
 * it listens on, so its peers' local connect fails and must fall back to TCP.
 */
export const localPublishing: { unreachableName?: string } = {};
