import { CollectiveError } from '../../errors.js';
import { packageRequire, resolveKoffi } from '../start-worker.js';
import type { PeerLink } from './peer-link.js';
import { COUNTER, tcpCounters } from './tcp-connections.js';

/**
 * libc's send, recv and poll through koffi (an FFI with prebuilt binaries in its npm package, an
 * optional peer dependency), for the tcp engine's native data path ([Note: native data path] in
 * native-ring.ts). Linux only: the errno and flag values below are Linux's.
 */
export interface NativeSockets {
  /** send(2) with MSG_DONTWAIT | MSG_NOSIGNAL: bytes taken, or -1 (see `errno`). */
  send(fd: number, bytes: Uint8Array, length: number): number;
  /** recv(2) with MSG_DONTWAIT: bytes read, 0 at end of stream, or -1 (see `errno`). */
  recv(fd: number, into: Uint8Array, length: number): number;
  /** poll(2) over `count` struct pollfd in `fds` (see PollSet). */
  poll(fds: ArrayBuffer, count: number, timeoutMs: number): number;
  /** errno of the last call on this thread. */
  errno(): number;
  /** CPU time of the calling thread, ms (bench/sweep.ts). */
  threadCpuMs(): number;
  /** The socket's address family (getsockopt SO_DOMAIN: AF_UNIX 1, AF_INET 2, AF_INET6 10), or -1. */
  domain(fd: number): number;
  /**
   * Asks for a send buffer of `bytes` (setsockopt SO_SNDBUF: the kernel caps the request at
   * net.core.wmem_max and doubles it for its bookkeeping); returns the size the socket then has
   * (getsockopt), or -1.
   */
  setSendBuffer(fd: number, bytes: number): number;
  /** The socket's send buffer size (getsockopt SO_SNDBUF), or -1. */
  sendBuffer(fd: number): number;
}

export const AF_UNIX = 1;
const SOL_SOCKET = 1;
const SO_SNDBUF = 7;
const SO_DOMAIN = 39;

export const EAGAIN = 11;
export const EINTR = 4;
const MSG_DONTWAIT = 0x40;
const MSG_NOSIGNAL = 0x4000;
const CLOCK_THREAD_CPUTIME_ID = 3;
export const POLLIN = 0x1;
export const POLLOUT = 0x4;
export const POLLERR = 0x8;
export const POLLHUP = 0x10;
export const POLLRDHUP = 0x2000;

/** struct pollfd { int fd; short events; short revents; } for up to `capacity` descriptors. */
export class PollSet {
  readonly buffer: ArrayBuffer;
  private readonly fds: Int32Array;
  private readonly shorts: Int16Array;
  count = 0;

  constructor(capacity: number) {
    this.buffer = new ArrayBuffer(8 * Math.max(1, capacity));
    this.fds = new Int32Array(this.buffer);
    this.shorts = new Int16Array(this.buffer);
  }

  set(index: number, fd: number, events: number): void {
    this.fds[2 * index] = fd;
    this.shorts[4 * index + 2] = events;
    this.shorts[4 * index + 3] = 0;
  }

  fd(index: number): number {
    return this.fds[2 * index]!;
  }

  revents(index: number): number {
    return this.shorts[4 * index + 3]! & 0xffff;
  }
}

/** FSDP_TCP_NATIVE and FSDP_TCP_BLAS: unset or empty `auto`, `0`/`false` `off`, `1`/`true` `required`. */
export type NativeSwitch = 'auto' | 'off' | 'required';

export function readNativeSwitch(variable: string, rank: number, fix: string): NativeSwitch {
  const value = process.env[variable];
  if (value === undefined || value === '') return 'auto';
  if (value === '0' || value === 'false') return 'off';
  if (value === '1' || value === 'true') return 'required';
  throw new CollectiveError(`${variable} is '${value}'; expected 1, 0 or unset.`, {
    code: 'invalid-argument',
    rank,
    expected: "'1', 'true', '0', 'false' or unset",
    actual: value,
    fix,
  });
}

interface Koffi {
  load(path: string): { func(signature: string): (...args: unknown[]) => number };
  errno(): number;
}

/** `FSDP_TCP_NATIVE`: unset for the native path when available, 0 for node:net, 1 to require it. */
export function nativeSetting(rank: number): NativeSwitch {
  return readNativeSwitch(
    'FSDP_TCP_NATIVE',
    rank,
    'unset FSDP_TCP_NATIVE to use the native tcp data path when koffi is installed, set it to 0 to move every byte through node:net, or to 1 to fail when the native path cannot load.',
  );
}

/** Where koffi is (main thread), or undefined: native path off, no koffi, not Linux. */
export function resolveNativeSocketsModule(rank = 0): string | undefined {
  const setting = nativeSetting(rank);
  if (setting === 'off') return undefined;
  const path = process.platform === 'linux' ? resolveKoffi() : undefined;
  if (path === undefined && setting === 'required')
    throw new CollectiveError(
      `FSDP_TCP_NATIVE=1 asks for the native tcp data path, which needs Linux and koffi (${process.platform === 'linux' ? 'koffi is not installed' : `this is ${process.platform}`}).`,
      {
        code: 'invalid-argument',
        rank,
        fix: 'npm install koffi (on Linux), or unset FSDP_TCP_NATIVE to fall back to node:net.',
      },
    );
  return path;
}

export function loadNativeSockets(koffiPath: string | undefined): NativeSockets | undefined {
  if (koffiPath === undefined) return undefined;
  try {
    const koffi = packageRequire()(koffiPath) as Koffi;
    const libc = koffi.load('libc.so.6');
    const send = libc.func('long send(int, const void *, size_t, int)');
    const recv = libc.func('long recv(int, void *, size_t, int)');
    const poll = libc.func('int poll(void *, unsigned long, int)');
    const clockGettime = libc.func('int clock_gettime(int, void *)');
    const setsockopt = libc.func('int setsockopt(int, int, int, const void *, unsigned int)');
    const getsockopt = libc.func('int getsockopt(int, int, int, void *, void *)');
    const timespec = new BigInt64Array(2);
    const option = new Int32Array(1);
    const optionLength = new Uint32Array(1);
    const readOption = (fd: number, name: number): number => {
      optionLength[0] = 4;
      return getsockopt(fd, SOL_SOCKET, name, option, optionLength) === 0 ? option[0]! : -1;
    };
    return {
      send: (fd, bytes, length) => send(fd, bytes, length, MSG_DONTWAIT | MSG_NOSIGNAL),
      recv: (fd, into, length) => recv(fd, into, length, MSG_DONTWAIT),
      poll: (fds, count, timeoutMs) => poll(fds, count, timeoutMs),
      errno: () => koffi.errno(),
      threadCpuMs: () => {
        clockGettime(CLOCK_THREAD_CPUTIME_ID, timespec);
        return Number(timespec[0]!) * 1000 + Number(timespec[1]!) / 1e6;
      },
      domain: (fd) => readOption(fd, SO_DOMAIN),
      setSendBuffer: (fd, bytes) => {
        option[0] = bytes;
        if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, option, 4) !== 0) return -1;
        return readOption(fd, SO_SNDBUF);
      },
      sendBuffer: (fd) => readOption(fd, SO_SNDBUF),
    };
  } catch {
    return undefined;
  }
}

/**
 * [Note: local send buffers]
 * A Unix-domain socket's send buffer (212 992 bytes by default) bounds what a rank hands the
 * kernel before its peer reads, so a 1.5 MiB ring step took about eight hand-offs, each waiting
 * for the peer's thread to be scheduled. On the native path each local link asks once for
 * FSDP_TCP_SEND_BUFFER bytes (default 4 MiB; the kernel caps it at net.core.wmem_max). TCP links
 * keep the kernel's autotuning, and node:net-only groups the default. Measurements:
 * architecture/performance.md, "ranks on one host".
 */
export const DEFAULT_SEND_BUFFER_BYTES = 4 * 1024 * 1024;

/** FSDP_TCP_SEND_BUFFER: bytes each local link asks for; 0 keeps the kernel's default. */
export function sendBufferSetting(rank: number): number {
  const value = process.env.FSDP_TCP_SEND_BUFFER;
  if (value === undefined || value === '') return DEFAULT_SEND_BUFFER_BYTES;
  const bytes = Number(value);
  if (/^\d+$/.test(value) && Number.isSafeInteger(bytes) && bytes <= 2 ** 30) return bytes;
  throw new CollectiveError(
    `FSDP_TCP_SEND_BUFFER is '${value}'; expected a number of bytes from 0 to 2^30.`,
    {
      code: 'invalid-argument',
      rank,
      expected: 'an integer from 0 to 1073741824, or unset',
      actual: value,
      fix: `unset FSDP_TCP_SEND_BUFFER for ${DEFAULT_SEND_BUFFER_BYTES} bytes per local link, set it to 0 to keep the kernel's default, or to a byte count such as 8388608.`,
    },
  );
}

/** Test hook: the smallest and largest local link send buffer so far (0 until one). */
export function localSendBufferBytes(): { smallest: number; largest: number } {
  const buffer = tcpCounters();
  return {
    smallest: Atomics.load(buffer, COUNTER.smallestSendBuffer),
    largest: Atomics.load(buffer, COUNTER.largestSendBuffer),
  };
}

/** [Note: local send buffers]; with 0 asks for nothing. The sizes go to `report` either way. */
export function enlargeLocalSendBuffers(
  links: readonly (PeerLink | null)[],
  sockets: NativeSockets,
  bytes: number,
  report: Int32Array | undefined,
): void {
  for (const link of links) {
    const fd = link?.fd();
    if (fd === undefined || sockets.domain(fd) !== AF_UNIX) continue;
    const size = bytes === 0 ? sockets.sendBuffer(fd) : sockets.setSendBuffer(fd, bytes);
    if (size <= 0 || report === undefined) continue;
    // Several groups' workers may report at once.
    const [low, high] = [COUNTER.smallestSendBuffer, COUNTER.largestSendBuffer];
    for (let smallest = Atomics.load(report, low); smallest === 0 || size < smallest; ) {
      const seen = Atomics.compareExchange(report, low, smallest, size);
      if (seen === smallest) break;
      smallest = seen;
    }
    for (let largest = Atomics.load(report, high); size > largest; ) {
      const seen = Atomics.compareExchange(report, high, largest, size);
      if (seen === largest) break;
      largest = seen;
    }
  }
}
