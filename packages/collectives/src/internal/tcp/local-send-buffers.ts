import { CollectiveError } from '../../errors.js';
import { AF_UNIX, type NativeSockets } from './native-sockets.js';
import type { PeerLink } from './peer-link.js';

/**
 * [Note: local send buffers]
 * A Unix-domain stream socket's send buffer bounds how many bytes a rank can hand the kernel
 * before its peer reads them: 212 992 bytes by default (net.core.wmem_default). A ring step
 * moves a whole segment (FSDP's all-gathers and reduce-scatters of one GPT block move 1.5 MiB
 * per rank at W=2), so with the default a step is about eight hand-offs in which each side
 * waits for the other's communication thread to be scheduled. On two cores shared by two
 * ranks' compute and communication threads that wait is what the ops spent their time on:
 * in the communication-bound fsdp bench, all-gathers of a block took 3.5-4.6 ms (median) and
 * reduce-scatters 6.1-6.2, against 2.4-2.8 and 5.1-5.3 with 4 MiB asked for (2026-12-01).
 * So on the native data path each local link asks for FSDP_TCP_SEND_BUFFER bytes (default
 * 4 MiB) once, when the mesh is formed. The kernel caps the request at net.core.wmem_max (no
 * privilege needed; 4 MiB on the machines we measured, 212 992 in a stock kernel) and doubles
 * it for its own bookkeeping. Memory is only used while bytes are in flight. TCP links keep
 * the kernel's autotuning (setting SO_SNDBUF would turn it off), and node:net-only groups
 * (no koffi) keep the default: Node cannot set it.
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

/**
 * Send buffer sizes of the local links this process has formed so far, in any group, after the
 * request (the smallest and the largest; 0 until one exists; never reset): a SharedArrayBuffer the main thread posts to each tcp communication
 * worker. An internal diagnostic, not API: the tests read it (localSendBufferBytes).
 */
let sizes: Int32Array | undefined;

export function localSendBufferReport(): Int32Array {
  sizes ??= new Int32Array(new SharedArrayBuffer(8));
  return sizes;
}

/** The smallest and largest send buffer of the local links this process formed so far (0 until one). */
export function localSendBufferBytes(): { smallest: number; largest: number } {
  const report = localSendBufferReport();
  return { smallest: Atomics.load(report, 0), largest: Atomics.load(report, 1) };
}

/**
 * Asks for `bytes` of send buffer on every Unix-domain link (see [Note: local send buffers]);
 * with 0 asks for nothing. Either way the links' sizes go to `report`.
 */
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
    // Several groups' workers may report at once: compare-and-swap until this size is in.
    for (let smallest = Atomics.load(report, 0); smallest === 0 || size < smallest; ) {
      const seen = Atomics.compareExchange(report, 0, smallest, size);
      if (seen === smallest) break;
      smallest = seen;
    }
    for (let largest = Atomics.load(report, 1); size > largest; ) {
      const seen = Atomics.compareExchange(report, 1, largest, size);
      if (seen === largest) break;
      largest = seen;
    }
  }
}
