import type { NativeReduce } from './native-blas.js';
import {
  EAGAIN,
  EINTR,
  type NativeSockets,
  POLLERR,
  POLLHUP,
  POLLIN,
  POLLOUT,
  POLLRDHUP,
  PollSet,
} from './native-sockets.js';
import type { PeerLink } from './peer-link.js';
import type { RingPlan, RingScratch, StepConsumer } from './ring.js';
import { stepConsumer } from './ring-steps.js';
import { loseNatively } from './tcp-failure.js';

/** A native slice's longest run before the event loop gets a turn. */
export const NATIVE_SLICE_MS = 100;
const POLL_MS = 20;

/**
 * [Note: native data path]
 * A ring schedule's bulk bytes move through libc's send/recv/poll (koffi) on the connections' own
 * file descriptors, from the communication worker's thread; connecting, authentication, control
 * frames, non-ring ops and TLS links stay on node:net (decisions/2026-12-02-one-tcp-data-path.md).
 * The switch is safe because the thread is synchronous while it runs natively: libuv reads a socket
 * only when the event loop runs, so every byte it read before is in the PeerLink's queue (consumed
 * first) and every later byte is still in the kernel. A slice ends ('yield') when the op is done,
 * after NATIVE_SLICE_MS, when the group is being destroyed, or when a connection ends (seen by
 * send/recv or by a poll of every connection on each pass): that link fails at once, naming its
 * peer, with its readable bytes queued so a notice is found as on node:net ([Note: blaming a lost
 * peer]).
 */
export class NativeRingRun {
  private readonly steps: RingPlan['steps'];
  private stepIndex = 0;
  private consumer: StepConsumer | undefined;
  private remaining = 0;
  private readonly sendQueue = new SendQueue();
  private readonly polls: PollSet;

  constructor(
    private readonly plan: RingPlan,
    private readonly previous: PeerLink,
    private readonly next: PeerLink | null,
    private readonly links: readonly (PeerLink | null)[],
    private readonly sockets: NativeSockets,
    private readonly scratch: RingScratch,
    private readonly receiveBuffer: Uint8Array,
    private readonly abort: Int32Array,
    private readonly reduce?: NativeReduce,
  ) {
    this.steps = plan.steps.filter((step) => step.end > step.start);
    this.polls = new PollSet(links.length + 1);
    this.startStep();
  }

  queueSend(bytes: Uint8Array): void {
    this.sendQueue.push(bytes);
  }

  waitingOn(): number | undefined {
    if (this.stepIndex < this.steps.length) return this.previous.peer;
    return this.sendQueue.pending() ? this.next?.peer : undefined;
  }

  run(sliceMs: number): 'done' | 'yield' {
    const started = performance.now();
    this.drainQueued();
    // [Note: clean departure] A departed peer's bytes were queued and are taken above; if the op
    // still needs more from it, or must still send it some, it left too soon.
    if (this.previous.departed() !== undefined && this.stepIndex < this.steps.length) {
      this.previous.failDeparted();
      return 'yield';
    }
    if (this.next?.departed() !== undefined && this.sendQueue.pending()) {
      this.next.failDeparted();
      return 'yield';
    }
    const previousFd = this.previous.fd() ?? -1;
    const nextFd = this.next?.fd() ?? -1;
    const { sockets, receiveBuffer } = this;
    for (;;) {
      // A hang-up on any connection, each pass: a rank busy receiving must notice another's death first-hand.
      const hungUp = this.pollOnce(previousFd, nextFd, 0);
      if (hungUp !== undefined) return this.lost(hungUp, undefined);
      const sent = this.sendQueue.send(sockets, nextFd);
      if (typeof sent === 'object') return this.lost(this.next!, sent.errno);
      const progressed = sent === 'progress';
      if (this.consumer !== undefined) {
        const direct = this.consumer.target?.();
        const received =
          direct === undefined
            ? sockets.recv(previousFd, receiveBuffer, Math.min(this.remaining, receiveBuffer.length))
            : sockets.recv(previousFd, direct, Math.min(this.remaining, direct.length));
        if (received > 0) {
          if (direct === undefined) this.deliver(receiveBuffer.subarray(0, received));
          else this.advance(received);
          continue;
        }
        if (received === 0) return this.lost(this.previous, undefined);
        const error = sockets.errno();
        if (error !== EAGAIN && error !== EINTR) return this.lost(this.previous, error);
      }
      if (this.stepIndex >= this.steps.length && !this.sendQueue.pending()) return 'done';
      if (progressed) continue;
      if (Atomics.load(this.abort, 0) !== 0 || performance.now() - started > sliceMs) return 'yield';
      const troubled = this.pollOnce(previousFd, nextFd, POLL_MS);
      if (troubled !== undefined) return this.lost(troubled, undefined);
    }
  }

  /**
   * Waits for the data connections; returns a link in trouble. A hang-up counts on every
   * connection but the one this rank still receives from (recv returns what is left, then 0).
   */
  private pollOnce(previousFd: number, nextFd: number, timeoutMs: number): PeerLink | undefined {
    const { polls } = this;
    const polled: PeerLink[] = [];
    let count = 0;
    const receiving = this.stepIndex < this.steps.length;
    const sending = this.sendQueue.pending();
    for (const link of this.links) {
      const fd = link?.fd();
      if (fd === undefined) continue;
      let events = POLLRDHUP;
      if (fd === previousFd && receiving) events |= POLLIN;
      if (fd === nextFd && sending) events |= POLLOUT;
      polls.set(count++, fd, events);
      polled.push(link!);
    }
    const ready = this.sockets.poll(polls.buffer, count, timeoutMs);
    if (ready <= 0) return undefined;
    // A reset ends the slice at once; the end of the stream received from waits for recv; only
    // then another FIN. The engine decides the blame ([Note: blaming a lost peer]).
    let reset: PeerLink | undefined;
    let ended: PeerLink | undefined;
    let previousEnded = false;
    for (let index = 0; index < count; index++) {
      const revents = polls.revents(index);
      if ((revents & (POLLERR | POLLHUP)) !== 0) reset ??= polled[index];
      else if ((revents & POLLRDHUP) === 0) continue;
      else if (receiving && polls.fd(index) === previousFd) previousEnded = true;
      else ended ??= polled[index];
    }
    return reset ?? (previousEnded ? undefined : ended);
  }

  private lost(link: PeerLink, errno: number | undefined): 'yield' {
    loseNatively(link, errno, this.sockets);
    return 'yield';
  }

  /** Feeds what node:net read before this slice (the peer's eager bytes, typically). */
  private drainQueued(): void {
    const leftovers: Uint8Array[] = [];
    for (const chunk of this.previous.takeQueued()) {
      const rest = this.deliver(chunk);
      if (rest.length > 0) leftovers.push(rest);
    }
    // Bytes past this op's last step belong to the next op: back to the link, in order.
    if (leftovers.length > 0) this.previous.requeue(leftovers);
  }

  /** Returns what is left past the last step. */
  private deliver(chunk: Uint8Array): Uint8Array {
    let rest = chunk;
    while (rest.length > 0 && this.consumer !== undefined) {
      const take = Math.min(this.remaining, rest.length);
      this.consumer.consume(rest.subarray(0, take));
      rest = rest.subarray(take);
      this.received(take);
    }
    return rest;
  }

  private advance(count: number): void {
    this.consumer!.advance!(count);
    this.received(count);
  }

  private received(count: number): void {
    this.remaining -= count;
    if (this.remaining > 0) return;
    this.consumer!.end();
    this.stepIndex++;
    this.startStep();
  }

  private startStep(): void {
    const step = this.steps[this.stepIndex];
    if (step === undefined) {
      this.consumer = undefined;
      this.remaining = 0;
      return;
    }
    const forward = this.next === null ? null : (bytes: Uint8Array) => this.queueSend(bytes);
    this.consumer = stepConsumer(this.plan, step, forward, this.scratch, this.reduce);
    this.remaining = this.consumer.bytes;
  }
}

/** Runs a ring run or header exchange in slices; throws a link's failure, or once `groupBroke()`. */
export async function driveNativeRun(
  run: { run(sliceMs: number): 'done' | 'yield' },
  links: readonly (PeerLink | null)[],
  groupBroke: () => boolean,
): Promise<void> {
  for (;;) {
    for (const link of links) {
      const failure = link?.failed();
      if (failure !== undefined) throw failure;
    }
    if (groupBroke()) throw new Error('the group broke during the op');
    if (run.run(NATIVE_SLICE_MS) === 'done') return;
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}

/** Bytes still to go to one peer, in order, handed to the kernel with send(2). */
export class SendQueue {
  private readonly chunks: Uint8Array[] = [];
  private offset = 0;

  push(bytes: Uint8Array): void {
    if (bytes.length > 0) this.chunks.push(bytes);
  }

  pending(): boolean {
    return this.chunks.length > 0;
  }

  /** Sends until the kernel takes no more; `{ errno }` when the connection ended. */
  send(sockets: NativeSockets, fd: number): 'progress' | 'blocked' | { errno: number | undefined } {
    let progressed = false;
    while (this.chunks.length > 0) {
      const head = this.chunks[0]!;
      const sent = sockets.send(fd, head.subarray(this.offset), head.length - this.offset);
      if (sent > 0) {
        progressed = true;
        this.offset += sent;
        if (this.offset === head.length) {
          this.chunks.shift();
          this.offset = 0;
        }
        continue;
      }
      const error = sockets.errno();
      if (sent < 0 && (error === EAGAIN || error === EINTR)) break;
      return { errno: sent < 0 ? error : undefined };
    }
    return progressed ? 'progress' : 'blocked';
  }

  /** Empties the queue: what is unsent, in order. */
  take(): Uint8Array[] {
    const [head, ...rest] = this.chunks.splice(0);
    const offset = this.offset;
    this.offset = 0;
    if (head === undefined) return [];
    return [head.subarray(offset), ...rest].filter((chunk) => chunk.length > 0);
  }
}
