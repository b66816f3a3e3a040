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

export interface HeaderFrame {
  header: OpHeader;
  eagerBytes: number;
}

export interface NoticeHooks {
  /** [Note: abort]: returns the error to throw. */
  aborted(peer: number, message: string): CollectiveError;
  /** [Note: blaming a lost peer]: returns the error to throw. */
  lossNoticed(error: CollectiveError): CollectiveError;
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

/** Frames over node:net links ([Note: peer link]): headers with eager bytes, notices, send/recv payloads. */
export class NodeNetFrames {
  constructor(
    private readonly links: readonly (PeerLink | null)[],
    private readonly hooks: NoticeHooks,
  ) {}

  /**
   * [Note: eager first segment]; the caller compares the headers. Eager bytes beyond `eagerLimit`
   * come back as `late`, to send once the check passed.
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
      await this.skipEager(received);
    }
    return { headers, late };
  }

  async skipEager(received: readonly (HeaderFrame | null)[]): Promise<void> {
    await Promise.all(
      received.map((frame, peer) =>
        frame === null || frame.eagerBytes === 0
          ? undefined
          : this.links[peer]!.read(frame.eagerBytes, () => undefined),
      ),
    );
  }

  /** A header frame; a notice or goodbye instead throws its error (a failure notice an abort's). */
  async readFrame(link: PeerLink): Promise<HeaderFrame> {
    const frame = await this.readFrameOrNotice(link);
    if ('notice' in frame) throw this.hooks.aborted(link.peer, frame.notice.message);
    return frame;
  }

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
    const loss = lossNoticeHeader(bytes);
    if (loss !== undefined) {
      const message = await this.readBytes(link, loss.length + HEADER_BYTES);
      const error = noticeError(link.peer, {
        lost: loss.lost,
        message: message.toString('utf8', 0, loss.length),
        reason: loss.reason,
      });
      throw this.hooks.lossNoticed(error);
    }
    const goodbye = goodbyeHeader(bytes);
    if (goodbye !== undefined) throw link.goodbyeRead(goodbye);
    return { header: decodeHeader(bytes, link.peer), eagerBytes: eagerBytesIn(bytes) };
  }

  async send(link: PeerLink, header: OpHeader, input: CollectiveBuffer): Promise<void> {
    link.write(encodeHeader(header));
    link.write(new Uint8Array(input.buffer, input.byteOffset, input.byteLength));
    await link.flushed();
  }

  async receive(link: PeerLink, output: CollectiveBuffer): Promise<void> {
    await link.readInto(new Uint8Array(output.buffer, output.byteOffset, output.byteLength));
  }

  private async readBytes(link: PeerLink, length: number): Promise<Buffer> {
    const bytes = Buffer.alloc(length);
    await link.readInto(bytes);
    return bytes;
  }
}
