import type { Socket } from 'node:net';
import { isTlsFailure } from '../../auth/secure-socket.js';
import { CollectiveError } from '../../errors.js';

interface Sink {
  remaining: number;
  onBytes: (chunk: Buffer) => void;
  resolve: () => void;
  reject: (error: Error) => void;
}

type LinkState = 'open' | 'failed';

/**
 * One authenticated connection to a peer, carrying both directions. Reads are "give me exactly
 * n bytes, chunk by chunk" (the handler runs synchronously on each chunk of the socket's own
 * buffers, so nothing is copied); bytes that arrive before anyone asks wait in a queue. Writes
 * are counted so an op can wait until the kernel has taken every byte it referenced.
 */
export class PeerLink {
  private state: LinkState = 'open';
  private readonly queued: Buffer[] = [];
  private sink: Sink | undefined;
  private pendingWrites = 0;
  private flushWaiters: { resolve: () => void; reject: (error: Error) => void }[] = [];
  private failure: CollectiveError | undefined;
  /** node:net reading is held for the native data path ([Note: held reading]). */
  private held = false;

  constructor(
    readonly peer: number,
    private readonly socket: Socket,
    private readonly onLost: (link: PeerLink, error: CollectiveError) => void,
    /** Told the size of every chunk node:net delivers, when profiling ([Note: native profile]). */
    private readonly onNodeNetRead?: (bytes: number) => void,
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
        : this.lose(`the connection to rank ${peer} failed (${cause.message})`, cause, true),
    );
    socket.on('close', () => this.lose(`rank ${peer} closed the connection`, undefined, true));
    socket.resume();
  }

  /** Whether a read is waiting for bytes from this peer. */
  isReading(): boolean {
    return this.sink !== undefined;
  }

  /** Feeds the next `bytes` bytes from the peer to `onBytes`, in order; resolves after the last. */
  read(bytes: number, onBytes: (chunk: Buffer) => void): Promise<void> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    if (this.sink !== undefined) throw new Error(`PeerLink ${this.peer}: overlapping reads`);
    if (bytes === 0) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.sink = { remaining: bytes, onBytes, resolve, reject };
      while (this.sink !== undefined && this.queued.length > 0) this.consume(this.queued.shift()!);
    });
  }

  write(data: Uint8Array): void {
    if (this.failure !== undefined || data.length === 0) return;
    this.pendingWrites++;
    this.socket.write(data, () => {
      this.pendingWrites--;
      if (this.pendingWrites === 0) for (const waiter of this.flushWaiters.splice(0)) waiter.resolve();
    });
  }

  /** Resolves once every write so far has been handed to the kernel. */
  flushed(): Promise<void> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    if (this.pendingWrites === 0) return Promise.resolve();
    return new Promise((resolve, reject) => this.flushWaiters.push({ resolve, reject }));
  }

  /**
   * The connection's file descriptor for the native data path ([Note: native data path]), or
   * undefined (a TLS socket, a closed one, or a platform without one).
   */
  fd(): number | undefined {
    if (this.failure !== undefined) return undefined;
    const fd = (this.socket as unknown as { _handle?: { fd?: unknown } | null })._handle?.fd;
    return typeof fd === 'number' && fd >= 0 ? fd : undefined;
  }

  /** Why this link failed, or undefined while it is open. */
  failed(): CollectiveError | undefined {
    return this.failure;
  }

  /**
   * [Note: held reading]
   * While an op runs on the native data path, node:net should not read this connection: its
   * event loop turns (waiting for a slower peer's header, a slice's yield) would otherwise read
   * the bulk bytes faster peers already send, at node:net's cost per byte (a Buffer per 64 KiB,
   * stream machinery, a copy out of the queue later): up to 2.7 MiB per op per rank at W=3,
   * 16 MiB (2737 KiB measured). So after a peer's header is read the socket is paused: node:net
   * then reads until its buffer reaches the high-water mark (64 KiB). Pausing does not stop it
   * for good: each `read()` that moves that buffer into the queue (`absorbBuffered`, through
   * `takeQueued` before every native slice) drops it below the mark, and Node starts reading
   * again, so node:net can take up to about 64 KiB more after each slice (measured 96–183 KiB
   * per op after this change). The rest stays in the kernel for the native receive.
   * Order is kept because everything node:net holds is older than what the
   * kernel holds: `takeQueued`, `unreadBytes` and `appendUnread` first move the socket's buffer
   * into the queue (`read()` emits it as 'data'). `releaseReading` (after the op, or before a
   * mismatch's eager bytes are skipped) resumes the socket, so between ops a lost peer or an
   * abort notice is seen as always.
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

  /** Takes the bytes that arrived but nobody read yet (for the native data path). */
  takeQueued(): Buffer[] {
    this.absorbBuffered();
    return this.queued.splice(0);
  }

  /** Puts bytes back in front of the queue, in order (the native path read past its op). */
  requeue(chunks: Uint8Array[]): void {
    this.queued.unshift(...chunks.map((chunk) => Buffer.from(chunk.buffer, chunk.byteOffset, chunk.length)));
  }

  /** Appends bytes read from the kernel after everything node:net holds (a lost connection's rest). */
  appendUnread(chunks: Uint8Array[]): void {
    this.absorbBuffered();
    for (const chunk of chunks) this.queued.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.length));
  }

  /** Moves what a held socket buffered into the queue: `read()` emits it as 'data', in order. */
  private absorbBuffered(): void {
    if (!this.held) return;
    while (this.socket.readableLength > 0 && this.socket.read() !== null) {}
  }

  /** The native data path saw this connection end (errno set) or close (see native-ring.ts). */
  lostNatively(errno: number | undefined): void {
    if (errno === undefined) this.lose(`rank ${this.peer} closed the connection`, undefined, true);
    else this.lose(`the connection to rank ${this.peer} failed (errno ${errno})`, undefined, true);
  }

  /** The bytes that arrived but nobody read yet. */
  unreadBytes(): Buffer {
    this.absorbBuffered();
    return Buffer.concat(this.queued);
  }

  /** Sends what was written, then closes this side gracefully (FIN, no reset). */
  end(): void {
    this.socket.end();
  }

  close(): void {
    this.lose(`this rank closed its connection to rank ${this.peer}`, undefined, false);
    this.socket.destroy();
  }

  private receive(chunk: Buffer): void {
    this.onNodeNetRead?.(chunk.length);
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
    if (this.state === 'failed') return;
    this.state = 'failed';
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
