import { CollectiveError } from './errors.js';
import { FAILED, PENDING, readFailure, SUCCEEDED } from './internal/status-word.js';

/** Lifecycle of a Work handle as the caller sees it. */
export type WorkState = 'pending' | 'succeeded' | 'failed';

/** Slack the main thread gives the worker beyond the op's own timeout before giving up itself. */
const WAIT_GRACE_MS = 5_000;

type WaitAsyncResult =
  | { async: false; value: 'not-equal' | 'timed-out' }
  | { async: true; value: Promise<string> };
type WaitAsync = (array: Int32Array, index: number, value: number, timeout?: number) => WaitAsyncResult;

/**
 * The handle every op returns at once. `wait()` blocks the calling thread (Atomics.wait on the
 * op's status word, see [Note: status word]) until the communication worker has finished the op,
 * then throws its CollectiveError if it failed; `await work` does the same without blocking.
 *
 * [Note: lazy thenable] No promise exists until someone calls `then`: a Work that fails without
 * being awaited never creates a rejected promise nobody handles (the wasm runtime aborts the
 * process on unhandled rejections).
 */
export class Work implements PromiseLike<void> {
  private state: WorkState = 'pending';
  private failure: CollectiveError | undefined;
  private promise: Promise<void> | undefined;

  /**
   * @param status the op's status word
   * @param description e.g. "allReduce (4 float32 elements, op sum) on rank 1"
   * @param timeoutMs the op's timeout; the worker enforces it, this only bounds the wait
   * @param onSucceeded runs once on the waiting thread after success (copies staged buffers back)
   * @param onSettled runs once when a caller first sees the outcome (wait, await): the op's
   *   outcome is then the caller's, not the exit report's ([Note: process exit])
   */
  constructor(
    private readonly status: Int32Array,
    private readonly description: string,
    private readonly timeoutMs: number,
    private readonly onSucceeded: (() => void) | undefined,
    private readonly onSettled?: () => void,
  ) {}

  /** Whether the op has finished (successfully or not), without blocking. */
  isCompleted(): boolean {
    return Atomics.load(this.status, 0) !== PENDING;
  }

  /** Blocks until the op finishes; throws its CollectiveError if it failed. */
  wait(): void {
    const deadline = Date.now() + this.timeoutMs + WAIT_GRACE_MS;
    while (Atomics.load(this.status, 0) === PENDING) {
      const remaining = deadline - Date.now();
      if (remaining <= 0) break;
      Atomics.wait(this.status, 0, PENDING, remaining);
    }
    this.settle();
  }

  // biome-ignore lint/suspicious/noThenProperty: Work is a thenable by design (`await work`).
  then<Fulfilled = void, Rejected = never>(
    // biome-ignore lint/suspicious/noConfusingVoidType: PromiseLike<void> requires this signature.
    onFulfilled?: ((value: void) => Fulfilled | PromiseLike<Fulfilled>) | null,
    onRejected?: ((reason: unknown) => Rejected | PromiseLike<Rejected>) | null,
  ): Promise<Fulfilled | Rejected> {
    this.promise ??= this.waitAsync();
    return this.promise.then(onFulfilled, onRejected);
  }

  private async waitAsync(): Promise<void> {
    const waitAsync = (Atomics as unknown as { waitAsync: WaitAsync }).waitAsync;
    const deadline = Date.now() + this.timeoutMs + WAIT_GRACE_MS;
    // [Note: process exit] Atomics.waitAsync does not keep the event loop alive, and the
    // communication worker is unref()'d: an awaited Work holds the loop with a timer of its own.
    const keepAlive = setTimeout(() => undefined, Math.min(this.timeoutMs + WAIT_GRACE_MS, 2 ** 31 - 1));
    try {
      while (Atomics.load(this.status, 0) === PENDING) {
        const remaining = deadline - Date.now();
        if (remaining <= 0) break;
        const result = waitAsync(this.status, 0, PENDING, remaining);
        if (result.async) await result.value;
      }
    } finally {
      clearTimeout(keepAlive);
    }
    this.settle();
  }

  private settle(): void {
    if (this.state === 'pending') {
      this.onSettled?.();
      const value = Atomics.load(this.status, 0);
      if (value === SUCCEEDED) this.succeed();
      else if (value === FAILED) this.fail(readFailure(this.status));
      else
        this.fail(
          new CollectiveError(
            `${this.description} did not finish within ${this.timeoutMs + WAIT_GRACE_MS} ms and the communication worker did not report a timeout.`,
            { code: 'timeout', fix: 'the worker is stuck or gone; destroy the group and restart the job.' },
          ),
        );
    }
    if (this.state === 'failed') throw this.failure;
  }

  private succeed(): void {
    if (this.state !== 'pending') throw new Error(`Work.succeed from state ${this.state}`);
    this.state = 'succeeded';
    this.onSucceeded?.();
  }

  private fail(error: CollectiveError): void {
    if (this.state !== 'pending') throw new Error(`Work.fail from state ${this.state}`);
    this.state = 'failed';
    this.failure = error;
  }
}
