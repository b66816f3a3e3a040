import { CollectiveError } from '../errors.js';
import type { StoreClient } from '../store/store-client.js';
import { describeRanks } from './rank-range.js';

/**
 * How the launchers of one job agree, through the store on node 0 (keys under `fsdp-run/`):
 *   attempt-A/joined/K   node K is ready to start attempt A (all wait for every node)
 *   attempt-A/failed     the first failure of attempt A, as text; set by the launcher whose
 *                        worker failed, or by the store itself when a launcher's connection
 *                        drops (setOnDisconnect), so a SIGKILLed launcher fails the job too
 *   attempt-A/done/K     every worker of node K exited 0
 *   finished/K           node K has its verdict; node 0 keeps the store up until all have it
 *                        (also set by the store when K's connection drops)
 *   stopped              the job ends without restart: a launcher was interrupted by a signal
 *                        or lost (set on disconnect), so it will not join another attempt
 * [Note: launcher agreement] Every launcher reads the same `failed` key and has the same
 * --max-restarts, so all decide alike whether to restart.
 */
export class JobCoordinator {
  private readonly prefix = 'fsdp-run/';

  constructor(
    private readonly store: StoreClient,
    private readonly nodeRank: number,
    private readonly nnodes: number,
    private readonly timeoutMs: number,
    /** Workers per node: lets the on-disconnect message name the ranks that were lost. */
    private readonly nprocPerNode?: number,
  ) {}

  /**
   * What the store records when this launcher's connection drops (killed, crashed, cut off):
   * names the node and, when known, its ranks, e.g. `lost the launcher of node 1 (ranks 2-3; ...)`.
   */
  private lostMessage(): string {
    const count = this.nprocPerNode;
    const first = count === undefined ? 0 : this.nodeRank * count;
    const ranks = count === undefined ? '' : `${describeRanks(first, count)}; `;
    return `lost the launcher of node ${this.nodeRank} (${ranks}its connection to the store closed)`;
  }

  /** Arms the job-level on-disconnect keys of this launcher (call once, before attempt 0). */
  async arm(): Promise<void> {
    const lost = this.lostMessage();
    await this.store.setOnDisconnect(`${this.prefix}stopped`, lost);
    await this.store.setOnDisconnect(`${this.prefix}finished/${this.nodeRank}`, lost);
  }

  /** Records that the job stops for good (no restart), then fails attempt A with `message`. */
  async reportStop(attempt: number, message: string): Promise<void> {
    await this.store.compareSet(`${this.prefix}stopped`, '', message);
    await this.reportFailure(attempt, message);
  }

  /** Whether some launcher stopped the job for good (see reportStop). */
  stopped(): Promise<boolean> {
    return this.store.check([`${this.prefix}stopped`]);
  }

  /** Joins attempt A and waits until every node has; arms the on-disconnect failure. */
  async join(attempt: number): Promise<void> {
    await this.store.setOnDisconnect(this.key(attempt, 'failed'), this.lostMessage());
    await this.store.set(this.key(attempt, `joined/${this.nodeRank}`), '1');
    try {
      await this.store.wait(this.nodeKeys(attempt, 'joined'), { timeoutMs: this.timeoutMs });
    } catch (cause) {
      throw new CollectiveError(
        `Not every node's fsdp-run joined attempt ${attempt} within ${this.timeoutMs} ms.`,
        {
          code: 'launch',
          cause,
          fix: 'start fsdp-run on every node with the same --nnodes, --master-addr, --master-port and job secret.',
        },
      );
    }
  }

  /** Records a failure of attempt A unless one is recorded already; returns the one that stands. */
  async reportFailure(attempt: number, message: string): Promise<string> {
    const stored = await this.store.compareSet(this.key(attempt, 'failed'), '', message);
    return Buffer.from(stored).toString('utf8');
  }

  /** Resolves with the failure message of attempt A whenever one is recorded. */
  async failure(attempt: number): Promise<string> {
    for (;;) {
      try {
        return Buffer.from(
          await this.store.get(this.key(attempt, 'failed'), { timeoutMs: 3_600_000 }),
        ).toString();
      } catch (error) {
        if (!(error instanceof CollectiveError) || error.code !== 'timeout') throw error;
      }
    }
  }

  /** Marks this node's workers of attempt A done and resolves when every node's are. */
  async done(attempt: number): Promise<void> {
    await this.store.set(this.key(attempt, `done/${this.nodeRank}`), '1');
    await this.store.wait(this.nodeKeys(attempt, 'done'), { timeoutMs: 2 ** 31 - 1 - 10_000 });
  }

  /** Disarms the on-disconnect failure of attempt A (the attempt ended with a verdict). */
  async leave(attempt: number): Promise<void> {
    await this.store.clearOnDisconnect(this.key(attempt, 'failed'));
  }

  /** Says this node has its verdict and disarms; on node 0, waits (bounded) until every node has. */
  async finish(): Promise<void> {
    await this.store.set(`${this.prefix}finished/${this.nodeRank}`, '1');
    await this.store.clearOnDisconnect(`${this.prefix}finished/${this.nodeRank}`);
    await this.store.clearOnDisconnect(`${this.prefix}stopped`);
    if (this.nodeRank !== 0) return;
    const keys = Array.from({ length: this.nnodes }, (_, node) => `${this.prefix}finished/${node}`);
    await this.store.wait(keys, { timeoutMs: Math.min(this.timeoutMs, 30_000) }).catch(() => {});
  }

  private key(attempt: number, name: string): string {
    return `${this.prefix}attempt-${attempt}/${name}`;
  }

  private nodeKeys(attempt: number, name: string): string[] {
    return Array.from({ length: this.nnodes }, (_, node) => this.key(attempt, `${name}/${node}`));
  }
}
