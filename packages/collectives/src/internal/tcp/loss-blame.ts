import type { CollectiveError } from '../../errors.js';
import { attributeLoss, type ReportedLoss } from './loss-attribution.js';
import type { NativeSockets } from './native-sockets.js';
import type { PeerLink } from './peer-link.js';

/** How long a loss seen only on the connection this rank receives from waits for more evidence. */
const LOSS_SETTLE_MS = 250;
const LOSS_SETTLE_POLL_MS = 5;

/** What the engine does with the blame. */
export interface LossBlameHooks {
  /** Whether the group already broke (another way, or an earlier verdict). */
  isBroken(): boolean;
  /** The verdict is in: break the group for it. */
  decided(error: CollectiveError): void;
}

/**
 * The one owner of deciding whom a tcp engine blames for a lost connection ([Note: blaming a
 * lost peer] in loss-attribution.ts). States: idle (nothing reported), deciding (the only
 * evidence is the connection this rank receives from ending without a notice: it looks again
 * every LOSS_SETTLE_POLL_MS for LOSS_SETTLE_MS, and a failing op waits on `deciding`), decided
 * (the engine's `decided` hook ran; a waiting op fails with the verdict).
 */
export class LossBlame {
  readonly #reported: ReportedLoss[] = [];
  #pending:
    | { verdict: Promise<CollectiveError>; settle: (error: CollectiveError) => void; deadline: number }
    | undefined;

  constructor(
    private readonly links: readonly (PeerLink | null)[],
    private readonly sockets: NativeSockets | undefined,
    private readonly context: { rank: number; previous: number },
    private readonly hooks: LossBlameHooks,
  ) {}

  /** A connection's end was reported (node:net's close or error, or the native path's). */
  report(loss: ReportedLoss): void {
    this.#reported.push(loss);
    this.#decide();
  }

  /** A verdict found elsewhere (an abort notice, a loss notice where a header was expected). */
  settle(error: CollectiveError): void {
    this.hooks.decided(error);
    this.#pending?.settle(error);
    this.#pending = undefined;
  }

  /** The verdict a failing op waits for while the blame is being decided, else undefined. */
  get deciding(): Promise<CollectiveError> | undefined {
    return this.#pending?.verdict;
  }

  #decide(): void {
    if (this.#reported.length === 0) return;
    if (this.hooks.isBroken()) {
      // Broken some other way meanwhile: the running op already failed with that cause.
      this.#pending?.settle(this.#reported[0]!.error);
      this.#pending = undefined;
      return;
    }
    const verdict = attributeLoss(this.#reported, this.links, this.sockets, this.context);
    if (verdict.settled) {
      this.settle(verdict.error);
      return;
    }
    if (this.#pending === undefined) {
      let settle: (error: CollectiveError) => void = () => undefined;
      const promise = new Promise<CollectiveError>((resolve) => {
        settle = resolve;
      });
      this.#pending = { verdict: promise, settle, deadline: performance.now() + LOSS_SETTLE_MS };
    }
    if (performance.now() >= this.#pending.deadline) this.settle(verdict.error);
    else setTimeout(() => this.#decide(), LOSS_SETTLE_POLL_MS).unref();
  }
}
