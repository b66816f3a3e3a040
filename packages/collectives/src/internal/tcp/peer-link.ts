import type { Socket } from 'node:net';
import { isTlsFailure } from '../../auth/secure-socket.js';
import { CollectiveError } from '../../errors.js';
import { type Goodbye, goodbyeHeader, HEADER_BYTES } from './frame-header.js';

interface Sink {
  remaining: number;
  onBytes: (chunk: Buffer) => void;
  resolve: () => void;
  reject: (error: Error) => void;
}

/**
 * 'open'; 'departed' (the peer said goodbye and ended the stream: [Note: clean departure]);
 * 'failed' (lost, closed here, or read past a departed peer's last byte).
 */
type LinkState = 'open' | 'departed' | 'failed';

/**
 * [Note: clean departure]
 * A rank whose process ends normally first finishes its ops, then writes a goodbye
 * (frame-header.ts) on every connection, waits until the kernel has it and ends the stream;
 * every byte an op owes a peer is in the kernel before its Work completes, so the goodbye comes
 * last. A killed rank writes none. A connection that ends with a goodbye as its last unread 32
 * bytes, or whose goodbye was read where a header belonged, is 'departed', not lost: nobody is
 * blamed, the bytes before it stay readable, writes to it are dropped, and a read past them
 * fails with 'peer-lost' naming the peer and its collectives. That failure breaks the group here
 * without closing its links (TcpEngine's `breakGroup`), and this rank's own exit says goodbye.
 */

/**
 * [Note: peer link] One authenticated connection to a peer, both directions. A read takes exactly
 * n bytes, chunk by chunk, from the socket's own buffers (no copy); bytes nobody asked for yet
 * wait in a queue. Writes are counted, so an op can wait until the kernel has every byte.
 */
export class PeerLink {
  private state: LinkState = 'open';
  private readonly queued: Buffer[] = [];
  private sink: Sink | undefined;
  private pendingWrites = 0;
  private flushWaiters: { resolve: () => void; reject: (error: Error) => void }[] = [];
  private failure: CollectiveError | undefined;
  private departure: Goodbye | undefined;
  /** [Note: held reading] */
  private held = false;
  private settledSignal: { promise: Promise<void>; resolve: () => void } | undefined;

  constructor(
    readonly peer: number,
    private readonly socket: Socket,
    private readonly onLost: (link: PeerLink, error: CollectiveError) => void,
  ) {
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.receive(chunk));
    socket.on('error', (cause) =>
      isTlsFailure(cause)
        ? this.lose(
            `the secure connection to rank ${peer} failed authentication (${cause.message}): a byte was altered, injected or replayed on the way`,
            cause,
            true,
            'auth',
          )
        : this.ended(`the connection to rank ${peer} failed (${cause.message})`, cause),
    );
    socket.on('close', () => this.ended(`rank ${peer} closed the connection`, undefined));
    socket.resume();
  }

  isReading(): boolean {
    return this.sink !== undefined;
  }

  read(bytes: number, onBytes: (chunk: Buffer) => void): Promise<void> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    if (this.sink !== undefined) throw new Error(`PeerLink ${this.peer}: overlapping reads`);
    if (bytes === 0) return Promise.resolve();
    // A departed peer's bytes stay readable; nothing comes after them ([Note: clean departure]).
    if (this.state === 'departed' && this.queuedBytes() < bytes) return Promise.reject(this.departedError());
    return new Promise((resolve, reject) => {
      this.sink = { remaining: bytes, onBytes, resolve, reject };
      while (this.sink !== undefined && this.queued.length > 0) this.consume(this.queued.shift()!);
    });
  }

  readInto(into: Uint8Array): Promise<void> {
    let filled = 0;
    return this.read(into.length, (chunk) => {
      into.set(chunk, filled);
      filled += chunk.length;
    });
  }

  write(data: Uint8Array): void {
    if (this.state !== 'open' || data.length === 0) return;
    this.pendingWrites++;
    this.socket.write(data, () => {
      this.pendingWrites--;
      if (this.pendingWrites === 0) for (const waiter of this.flushWaiters.splice(0)) waiter.resolve();
    });
  }

  hasPendingWrites(): boolean {
    return this.pendingWrites > 0 && this.state === 'open';
  }

  flushed(): Promise<void> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    if (this.pendingWrites === 0 || this.state === 'departed') return Promise.resolve();
    return new Promise((resolve, reject) => this.flushWaiters.push({ resolve, reject }));
  }

  /** The file descriptor for the native data path; undefined for TLS, closed, or none. */
  fd(): number | undefined {
    if (this.state !== 'open') return undefined;
    const fd = (this.socket as unknown as { _handle?: { fd?: unknown } | null })._handle?.fd;
    return typeof fd === 'number' && fd >= 0 ? fd : undefined;
  }

  failed(): CollectiveError | undefined {
    return this.failure;
  }

  departed(): Goodbye | undefined {
    return this.departure;
  }

  /** Resolves once the link is no longer 'open' (departed or failed): nothing more is read from it. */
  settled(): Promise<void> {
    if (this.state !== 'open') return Promise.resolve();
    if (this.settledSignal === undefined) {
      let resolve!: () => void;
      const promise = new Promise<void>((done) => (resolve = done));
      this.settledSignal = { promise, resolve };
    }
    return this.settledSignal.promise;
  }

  /** A goodbye read where a header belonged: departed; returns the waiting op's error. */
  goodbyeRead(goodbye: Goodbye): CollectiveError {
    this.depart(goodbye);
    return this.departedError();
  }

  /** The native path needs more of a departed peer: fail with the departure's error, blaming nobody. */
  failDeparted(): void {
    if (this.state !== 'departed') return;
    this.state = 'failed';
    this.failure = this.departedError();
  }

  /**
   * [Note: held reading]
   * While an op runs on the native data path, node:net should not read its connections (it would
   * take the bulk bytes at its own cost per byte), so each socket is paused once its header is
   * read; node:net then reads at most to its high-water mark (64 KiB) after each `read()`. Order
   * is kept because what node:net holds is older than what the kernel holds: `takeQueued`,
   * `unreadBytes` and `appendUnread` first move the socket's buffer into the queue.
   * `releaseReading` (after the op, or before a mismatch's eager bytes are skipped) resumes it,
   * so between ops a lost peer or a notice is seen as always.
   */
  holdReading(): void {
    if (this.held || this.failure !== undefined) return;
    this.held = true;
    this.socket.pause();
  }

  releaseReading(): void {
    if (!this.held) return;
    this.absorbBuffered();
    this.held = false;
    this.socket.resume();
  }

  takeQueued(): Buffer[] {
    this.absorbBuffered();
    return this.queued.splice(0);
  }

  requeue(chunks: Uint8Array[]): void {
    this.queued.unshift(...chunks.map((chunk) => Buffer.from(chunk.buffer, chunk.byteOffset, chunk.length)));
  }

  /** Bytes read from the kernel, after everything node:net holds (a lost connection's rest). */
  appendUnread(chunks: Uint8Array[]): void {
    this.absorbBuffered();
    for (const chunk of chunks) this.queued.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.length));
  }

  private absorbBuffered(): void {
    if (!this.held) return;
    while (this.socket.readableLength > 0 && this.socket.read() !== null) {}
  }

  lostNatively(errno: number | undefined): void {
    if (errno === undefined) this.ended(`rank ${this.peer} closed the connection`, undefined);
    else this.ended(`the connection to rank ${this.peer} failed (errno ${errno})`, undefined);
  }

  /** Whether what the native path drained from an ended connection ends with a goodbye (then departed). */
  departedNatively(): boolean {
    if (this.state === 'open') {
      const goodbye = this.trailingGoodbye();
      if (goodbye !== undefined) this.depart(goodbye);
    }
    return this.state === 'departed';
  }

  unreadBytes(): Buffer {
    this.absorbBuffered();
    return Buffer.concat(this.queued);
  }

  /** FIN after what was written. */
  end(): void {
    this.socket.end();
  }

  close(): void {
    this.lose(`this rank closed its connection to rank ${this.peer}`, undefined, false);
    this.socket.destroy();
  }

  private ended(message: string, cause: unknown): void {
    if (this.state !== 'open') return;
    const goodbye = this.trailingGoodbye();
    if (goodbye !== undefined) this.depart(goodbye);
    else this.lose(message, cause, true);
  }

  private depart(goodbye: Goodbye): void {
    if (this.state !== 'open') return;
    this.state = 'departed';
    this.departure = goodbye;
    this.settledSignal?.resolve();
    const sink = this.sink;
    this.sink = undefined;
    sink?.reject(this.departedError());
    for (const waiter of this.flushWaiters.splice(0)) waiter.resolve();
  }

  private departedError(): CollectiveError {
    const collectives = this.departure?.collectives ?? 0;
    return new CollectiveError(
      `rank ${this.peer} left the group: its process ended normally after ${collectives} collective${collectives === 1 ? '' : 's'}, and this rank needs more from it`,
      {
        code: 'peer-lost',
        peer: this.peer,
        fix: `every rank must issue the same collectives before its script ends: rank ${this.peer} issued fewer (a loop that ran fewer steps there, or an early return or process.exit).`,
      },
    );
  }

  private trailingGoodbye(): Goodbye | undefined {
    this.absorbBuffered();
    const tail: Buffer[] = [];
    let length = 0;
    for (let index = this.queued.length - 1; index >= 0 && length < HEADER_BYTES; index--) {
      tail.unshift(this.queued[index]!);
      length += this.queued[index]!.length;
    }
    if (length < HEADER_BYTES) return undefined;
    const bytes = Buffer.concat(tail);
    return goodbyeHeader(bytes.subarray(bytes.length - HEADER_BYTES));
  }

  private queuedBytes(): number {
    this.absorbBuffered();
    let total = 0;
    for (const chunk of this.queued) total += chunk.length;
    return total;
  }

  private receive(chunk: Buffer): void {
    if (this.sink === undefined) this.queued.push(chunk);
    else this.consume(chunk);
  }

  private consume(chunk: Buffer): void {
    const sink = this.sink!;
    if (chunk.length > sink.remaining) {
      this.queued.unshift(chunk.subarray(sink.remaining));
      chunk = chunk.subarray(0, sink.remaining);
    }
    sink.remaining -= chunk.length;
    try {
      sink.onBytes(chunk);
    } catch (error) {
      this.sink = undefined;
      sink.reject(error as Error);
      return;
    }
    if (sink.remaining === 0) {
      this.sink = undefined;
      sink.resolve();
    }
  }

  private lose(
    message: string,
    cause: unknown,
    byPeer: boolean,
    code: 'peer-lost' | 'auth' = 'peer-lost',
  ): void {
    if (this.state !== 'open') return;
    this.state = 'failed';
    this.settledSignal?.resolve();
    this.failure = new CollectiveError(message, {
      code,
      peer: this.peer,
      cause,
      ...(code === 'auth'
        ? {
            fix: 'nothing to fix in the job: look for a device or process tampering with traffic between the hosts; the group is broken, restart from the last checkpoint.',
          }
        : {}),
    });
    const sink = this.sink;
    this.sink = undefined;
    sink?.reject(this.failure);
    for (const waiter of this.flushWaiters.splice(0)) waiter.reject(this.failure);
    if (byPeer) this.onLost(this, this.failure);
  }
}
