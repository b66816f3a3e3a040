import type { CollectiveError } from '../../errors.js';
import type { CollectiveBuffer } from '../../types.js';
import { type FailureNotice, type OpHeader, sameOp } from '../engine/engine-base.js';
import {
  abortMessageLength,
  decodeFailureNotice,
  decodeHeader,
  eagerBytesIn,
  encodeHeader,
  failureNoticeLength,
  goodbyeHeader,
  HEADER_BYTES,
  lossNoticeHeader,
} from './frame-header.js';
import type { PreparedOp } from './op-preparation.js';
import type { PeerLink } from './peer-link.js';
import { noticeError } from './tcp-failure.js';

/** A peer's header frame: its header and the eager bytes it announces. */
export interface HeaderFrame {
  header: OpHeader;
  eagerBytes: number;
}

/** What the engine does with a notice that arrives where a header was expected. */
export interface NoticeHooks {
  /** A peer aborted ([Note: abort]): mark the group broken and return the error to throw. */
  aborted(peer: number, message: string): CollectiveError;
  /** A peer lost another rank and says so ([Note: blaming a lost peer]); its error is thrown next. */
  lossNoticed(error: CollectiveError): void;
}

/**
 * [Note: eager first segment]
 * A collective's header goes out with the bytes its schedule sends before anything arrives (a
 * ring's initial range to the next rank, a direct all-reduce's payload to every peer); the header
 * announces how many follow it. Then the rank reads every peer's header and compares: on a match
 * the schedule finds the peer's eager bytes queued; on a difference every rank fails with
 * 'mismatch' after skipping the eager bytes each peer announced, so the streams stay aligned. A
 * mismatched op may leave the caller's buffers partly written.
 */

/**
 * Frames over the node:net links ([Note: peer link]): header frames with their eager bytes, the
 * notices that may come in their place, and the payloads of send and recv. Barriers, TLS links
 * and ops that do not run natively take this path; the native path reads a notice here too.
 */
export class NodeNetFrames {
  constructor(
    private readonly links: readonly (PeerLink | null)[],
    private readonly hooks: NoticeHooks,
  ) {}

  /**
   * Writes this op's header and eager bytes to every peer and reads theirs (see [Note: eager first
   * segment]); on a difference, skips what each peer announced. The caller compares the headers.
   * Eager bytes too many to announce wait for the check: they are returned as `late`, for the
   * caller to send once it passed.
   */
  async exchange(
    header: OpHeader,
    eager: PreparedOp['eager'],
    next: PeerLink | null,
    eagerLimit: number,
  ): Promise<{ headers: (OpHeader | null)[]; late: [PeerLink, Uint8Array][] }> {
    const late: [PeerLink, Uint8Array][] = [];
    for (const link of this.links) {
      if (link === null) continue;
      const bytes = eager.toAll ?? (link === next ? eager.toNext : null);
      const announced = Math.min(bytes?.length ?? 0, eagerLimit);
      link.write(encodeHeader(header, announced));
      if (bytes === null) continue;
      link.write(bytes.subarray(0, announced));
      if (announced < bytes.length) late.push([link, bytes.subarray(announced)]);
    }
    const received = await Promise.all(
      this.links.map((link) => (link === null ? Promise.resolve(null) : this.readFrame(link))),
    );
    const headers = received.map((frame) => frame?.header ?? null);
    if (headers.some((theirs) => theirs !== null && !sameOp(header, theirs))) {
      // Skip what each peer sent ahead of its check, so the streams stay aligned.
      await this.skipEager(received);
    }
    return { headers, late };
  }

  /** Reads and drops the eager bytes every peer's frame announced. */
  async skipEager(received: readonly (HeaderFrame | null)[]): Promise<void> {
    await Promise.all(
      received.map((frame, peer) =>
        frame === null || frame.eagerBytes === 0
          ? undefined
          : this.links[peer]!.read(frame.eagerBytes, () => undefined),
      ),
    );
  }

  /**
   * A peer's header frame; throws the error of an abort or loss notice, or of a goodbye, that
   * came instead, and for a failure notice the error of an abort with its message ([Note:
   * failure agreement]).
   */
  async readFrame(link: PeerLink): Promise<HeaderFrame> {
    const frame = await this.readFrameOrNotice(link);
    if ('notice' in frame) throw this.hooks.aborted(link.peer, frame.notice.message);
    return frame;
  }

  /** A peer's header frame or failure notice; throws the error of an abort or loss notice. */
  async readFrameOrNotice(link: PeerLink): Promise<HeaderFrame | { notice: FailureNotice }> {
    const bytes = await this.readBytes(link, HEADER_BYTES);
    const noticeLength = failureNoticeLength(bytes);
    if (noticeLength !== undefined)
      return { notice: decodeFailureNotice(await this.readBytes(link, noticeLength), link.peer) };
    const abortLength = abortMessageLength(bytes);
    if (abortLength !== undefined) {
      const message = await this.readBytes(link, abortLength);
      throw this.hooks.aborted(link.peer, message.toString('utf8'));
    }
    // A peer lost another rank and says so before it closes ([Note: blaming a lost peer]).
    const loss = lossNoticeHeader(bytes);
    if (loss !== undefined) {
      const message = await this.readBytes(link, loss.length + HEADER_BYTES);
      const error = noticeError(link.peer, {
        lost: loss.lost,
        message: message.toString('utf8', 0, loss.length),
        reason: loss.reason,
      });
      this.hooks.lossNoticed(error);
      throw error;
    }
    // The peer finished and left before this op ([Note: clean departure]).
    const goodbye = goodbyeHeader(bytes);
    if (goodbye !== undefined) throw link.goodbyeRead(goodbye);
    return { header: decodeHeader(bytes, link.peer), eagerBytes: eagerBytesIn(bytes) };
  }

  /** A send's header and payload; resolves once node:net handed them to the kernel. */
  async send(link: PeerLink, header: OpHeader, input: CollectiveBuffer): Promise<void> {
    link.write(encodeHeader(header));
    link.write(new Uint8Array(input.buffer, input.byteOffset, input.byteLength));
    await link.flushed();
  }

  /** A recv's payload, after its header was read and checked. */
  async receive(link: PeerLink, output: CollectiveBuffer): Promise<void> {
    await link.readInto(new Uint8Array(output.buffer, output.byteOffset, output.byteLength));
  }

  private async readBytes(link: PeerLink, length: number): Promise<Buffer> {
    const bytes = Buffer.alloc(length);
    await link.readInto(bytes);
    return bytes;
  }
}
