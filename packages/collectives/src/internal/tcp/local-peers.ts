import { randomBytes } from 'node:crypto';
import { readFileSync, readlinkSync } from 'node:fs';
import { CollectiveError } from '../../errors.js';

/**
 * [Note: local peer sockets]
 * Ranks on the same host reach each other over a Unix-domain stream socket instead of TCP
 * loopback: same bytes, about half the kernel work (measured in Node 20 on this project's 2-core
 * machine, one process, 512 MiB in 1 MiB writes: loopback TCP 0.70-0.74 GB/s and 549 ms of
 * system CPU, AF_UNIX 1.40-1.46 GB/s and 183-201 ms). See the decision record
 * architecture/decisions/2026-11-30-collectives-data-path.md (decision 1, local peers).
 * - Each rank (Linux, FSDP_TCP_LOCAL unset or `unix`) also listens on an abstract-namespace
 *   socket `\0fsdp-ts-<random hex>`: no file, gone with the process. Its reach is that of
 *   127.0.0.1 (any process in the same network namespace), so the job-secret handshake and
 *   the identity exchange of [Note: tcp mesh] run on it unchanged, and are what protects it.
 * - The rank publishes `host:port unix=<name>@<host identity>` in the store; the host identity is
 *   the kernel's boot id and this process's network namespace, so two "hosts" simulated in
 *   separate namespaces of one machine do not match and keep talking TCP.
 * - A connecting rank whose identity equals the peer's tries the abstract socket; if that connect
 *   fails (any error), it connects to the TCP endpoint as before. An endpoint without the
 *   `unix=` part (FSDP_TCP_LOCAL=tcp, another platform) is reached over TCP.
 * - Everything above the socket (TLS of [Note: secure data links], the native data path's
 *   send/recv/poll on the descriptor, loss attribution) is the same on both kinds: a pipe handle
 *   has an fd, POLLRDHUP and ECONNRESET are reported for AF_UNIX streams as for TCP, and
 *   setNoDelay is a no-op on it.
 */
export type LocalTransport = 'unix' | 'tcp';

/** FSDP_TCP_LOCAL: `unix` (default where available) or `tcp` (always TCP between ranks). */
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

/**
 * This host and network namespace, as far as sockets can tell: boot id and the namespace's
 * inode. Undefined off Linux or when /proc does not say (then every peer is reached over TCP).
 */
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

/** A fresh abstract socket name (without the leading NUL). */
export function newLocalName(): string {
  return `fsdp-ts-${randomBytes(12).toString('hex')}`;
}

/** The path node:net listens on and connects to for abstract name `name`. */
export function abstractPath(name: string): string {
  return `\0${name}`;
}

/** Where a peer listens: its TCP endpoint and, if it published one, its local socket. */
export interface PeerEndpoint {
  host: string;
  port: number;
  local?: { name: string; identity: string };
}

/** `host:port`, then ` unix=<name>@<identity>` when the rank listens locally too. */
export function formatEndpoint(
  hostPort: string,
  local: { name: string; identity: string } | undefined,
): string {
  return local === undefined ? hostPort : `${hostPort} unix=${local.name}@${local.identity}`;
}

/** Reads formatEndpoint's text; a plain `host:port` (an older rank) has no local part. */
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
 * Connections of this process (every tcp group of it) by transport, [unix, tcp], counted by both
 * ends: a SharedArrayBuffer the main thread posts to each tcp communication worker. An internal
 * diagnostic, not API: the tests read it (localLinkCounts) to prove which transport ran.
 */
let counts: Int32Array | undefined;

export function localLinkCountBuffer(): Int32Array {
  counts ??= new Int32Array(new SharedArrayBuffer(8));
  return counts;
}

export function countLink(buffer: Int32Array | undefined, transport: LocalTransport): void {
  if (buffer !== undefined) Atomics.add(buffer, transport === 'unix' ? 0 : 1, 1);
}

/** Connections of this process that run over a Unix-domain socket, and over TCP. */
export function localLinkCounts(): { unix: number; tcp: number } {
  const buffer = localLinkCountBuffer();
  return { unix: Atomics.load(buffer, 0), tcp: Atomics.load(buffer, 1) };
}

/**
 * Test hook (internal): when set, this process publishes this abstract name instead of the one
 * it listens on, so its peers' local connect fails and must fall back to TCP.
 */
export const localPublishing: { unreachableName?: string } = {};
