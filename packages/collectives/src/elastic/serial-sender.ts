import type { Dealer, Router } from 'zeromq';

/**
 * A zeromq socket accepts one send at a time ("Socket is busy writing"): this queues them.
 * A send that fails (the socket closed, or a ROUTER peer vanished) is dropped: the rendezvous
 * notices lost peers through heartbeats, not through sends.
 */
export class SerialSender {
  private tail: Promise<void> = Promise.resolve();

  constructor(private readonly socket: Dealer | Router) {}

  send(parts: Buffer | Buffer[]): Promise<void> {
    this.tail = this.tail.then(async () => {
      try {
        await this.socket.send(parts);
      } catch {
        // Closed socket (send throws synchronously then) or unroutable peer: dropped.
      }
    });
    return this.tail;
  }

  /** Resolves when every queued send has been handed to zeromq (or `timeoutMs` passed). */
  async drain(timeoutMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.tail, new Promise((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
    clearTimeout(timer);
  }
}
