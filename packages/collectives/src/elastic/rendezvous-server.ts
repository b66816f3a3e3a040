import { randomBytes } from 'node:crypto';
import { describeRanks } from '../launcher/failure-report.js';
import type { StoreServer } from '../store/store-server.js';
import {
  decodeLauncherMessage,
  encodeMessage,
  type LauncherMessage,
  RENDEZVOUS_KEYS,
  type RoundMember,
  type ServerMessage,
  type StopReason,
} from './rendezvous-messages.js';

/**
 * What the rendezvous server knows of one connected launcher. State: 'waiting' (joined, in no
 * round) → 'member' (in the running round) → 'stopping' (told to stop; back to 'waiting' when it
 * joins again). Lost launchers are removed, never revived: a launcher that comes back joins anew.
 */
interface LauncherEntry {
  /** The id the launcher chose (the map key and its mailbox keys, see [Note: rendezvous keys]). */
  readonly id: string;
  readonly token: string;
  readonly name: string;
  readonly nproc: number;
  /** Order of first arrival: new launchers get node ranks after those already placed. */
  readonly arrival: number;
  state: 'waiting' | 'member' | 'stopping';
  /** ms (performance.now) of its last message. */
  lastSeen: number;
  /** Node rank in the latest round it was a member of. */
  nodeRank: number | undefined;
  /** Its workers of the current round all exited 0. */
  done: boolean;
}

export interface RendezvousServerOptions {
  /** The job's Store, hosted by this process: launchers reach the rendezvous through it. */
  store: StoreServer;
  minNodes: number;
  maxNodes: number;
  /** A launcher silent for this long is lost. */
  heartbeatTimeoutMs: number;
  /** Fewer than minNodes launchers for this long ends the job. */
  joinTimeoutMs: number;
  /** Once minNodes wait, how long to wait for more before forming a round (0 = at once). */
  lastCallMs: number;
  /** Rounds after a worker failure with every member back; more ends the job. */
  maxRestarts: number;
  log: (line: string) => void;
}

export type RendezvousOutcome = { kind: 'finished' } | { kind: 'aborted'; message: string };

type Phase = 'forming' | 'running' | 'stopping' | 'finished' | 'aborted';

/**
 * The elastic rendezvous: runs on the master host beside the job's Store, admits launchers
 * (their messages are writes to the Store, [Note: rendezvous keys]), watches their heartbeats
 * and runs rounds. [Note: rounds] Each round fixes the membership (at
 * most maxNodes launchers, node ranks in order of first arrival, keeping earlier members first),
 * the world size and the Store prefix. A round ends when a member is lost (heartbeat timeout or
 * `leave`), a member's worker fails, or a new launcher arrives while the round has room; every
 * member then stops its workers and joins again, and the next round forms once every live
 * launcher has (or maxNodes have). All done → `finish`; too few for joinTimeoutMs, or more
 * failure restarts than maxRestarts → `abort`. Phase changes only through the methods below.
 */
export class RendezvousServer {
  private readonly sequences = new Map<string, number>();
  private readonly entries = new Map<string, LauncherEntry>();
  private phase: Phase = 'forming';
  private round = -1;
  private restartCount = 0;
  private arrivals = 0;
  private rankOffsets = new Map<string, number>();
  private lastStop: { reason: StopReason; message: string; members: string[] } | undefined;
  private lost: { description: string; why: string; round: number }[] = [];
  private belowMinimumSince: number | undefined = performance.now();
  private lastCall: NodeJS.Timeout | undefined;
  private readonly ticker: NodeJS.Timeout;
  private refusedLogged = Number.NEGATIVE_INFINITY;
  /** The job's verdict once it has one ('finished' or 'aborted'), told to every launcher that asks. */
  private verdict: ServerMessage | undefined;
  private resolveOutcome!: (outcome: RendezvousOutcome) => void;
  /** Resolves when the job has its verdict (every launcher has been told). */
  readonly outcome: Promise<RendezvousOutcome>;

  constructor(private readonly options: RendezvousServerOptions) {
    this.outcome = new Promise((resolve) => (this.resolveOutcome = resolve));
    options.store.local.watch(RENDEZVOUS_KEYS.inbox, (key, value) => {
      const message = decodeLauncherMessage(Buffer.from(value));
      if (message === undefined) this.options.log('rendezvous: ignored a malformed message.');
      else this.handle(key.slice(RENDEZVOUS_KEYS.inbox.length), message);
    });
    this.ticker = setInterval(
      () => this.tick(),
      Math.min(1_000, Math.max(50, options.heartbeatTimeoutMs / 10)),
    );
    this.ticker.unref();
  }

  /** Stops serving (messages already written stay readable until the store closes). */
  close(): void {
    clearInterval(this.ticker);
    clearTimeout(this.lastCall);
  }

  /** Logs (rate-limited) a connection the store refused: a launcher without this job's secret. */
  refused(error: unknown): void {
    const cause = (error as { cause?: { reason?: string; message?: string } } | null)?.cause;
    const detail = cause?.reason ?? cause?.message ?? String(error);
    const now = performance.now();
    if (now - this.refusedLogged < 5_000) return;
    this.refusedLogged = now;
    this.options.log(
      `rendezvous: refused a launcher: its TLS-PSK handshake failed (${detail}); it does not hold this job's secret.`,
    );
  }

  /** Writes the launcher's next mailbox key, which it reads in order. */
  private send(entry: Pick<LauncherEntry, 'id'>, message: ServerMessage): void {
    const sequence = this.sequences.get(entry.id) ?? 0;
    this.sequences.set(entry.id, sequence + 1);
    this.options.store.local.set(RENDEZVOUS_KEYS.outbox(entry.id, sequence), encodeMessage(message));
  }

  private handle(id: string, message: LauncherMessage): void {
    const entry = this.entries.get(id);
    if (message.type === 'join' && entry === undefined && message.token === undefined) {
      this.admit(id, message.name, message.nproc);
      return;
    }
    if (entry === undefined || message.token !== entry.token) {
      this.options.log(
        `rendezvous: ignored a ${message.type} with a wrong session token (launcher id ${id}${entry === undefined ? ', unknown' : `, claims ${entry.name}`}).`,
      );
      return;
    }
    entry.lastSeen = performance.now();
    switch (message.type) {
      case 'heartbeat':
        break;
      case 'join':
        if (this.verdict !== undefined) {
          this.send(entry, this.verdict);
          return;
        }
        if (entry.state === 'member' && this.phase === 'running') return;
        entry.state = 'waiting';
        entry.done = false;
        this.formIfReady();
        break;
      case 'done':
        if (message.round !== this.round || entry.state !== 'member') return;
        entry.done = true;
        if (this.members().every((member) => member.done)) this.finish();
        break;
      case 'failed':
        if (message.round !== this.round || this.phase !== 'running' || entry.state !== 'member') return;
        this.stopRound('failure', `${message.message} (${this.describe(entry)})`);
        break;
      case 'leave':
        this.loseLauncher(entry, `it left: ${message.message}`);
        break;
    }
  }

  private admit(id: string, name: string, nproc: number): void {
    const entry: LauncherEntry = {
      id,
      token: randomBytes(16).toString('hex'),
      name,
      nproc,
      arrival: this.arrivals++,
      state: 'waiting',
      lastSeen: performance.now(),
      nodeRank: undefined,
      done: false,
    };
    this.entries.set(entry.id, entry);
    this.send(entry, { type: 'welcome', token: entry.token });
    if (this.verdict !== undefined) {
      this.send(entry, this.verdict);
      return;
    }
    this.options.log(`rendezvous: launcher ${name} (${nproc} processes) joined.`);
    if (this.phase === 'running') {
      if (this.members().length < this.options.maxNodes) this.stopRound('join', `launcher ${name} joined`);
      else
        this.options.log(`rendezvous: ${name} waits: the round already has ${this.options.maxNodes} nodes.`);
      return;
    }
    this.formIfReady();
  }

  private members(): LauncherEntry[] {
    return [...this.entries.values()].filter((entry) => entry.state === 'member');
  }

  /** `node 1 (10.0.0.2 (host-a, pid 7), ranks 2-3)`: how logs and errors name a launcher. */
  private describe(entry: LauncherEntry): string {
    const rankOffset = this.rankOffsets.get(entry.id);
    if (entry.nodeRank === undefined || rankOffset === undefined) return entry.name;
    return `node ${entry.nodeRank} (${entry.name}, ${describeRanks(rankOffset, entry.nproc)})`;
  }

  private tick(): void {
    const now = performance.now();
    for (const entry of [...this.entries.values()]) {
      if (now - entry.lastSeen > this.options.heartbeatTimeoutMs) {
        this.loseLauncher(entry, `no heartbeat for ${this.options.heartbeatTimeoutMs} ms`);
      }
    }
    if (
      this.phase === 'forming' &&
      this.belowMinimumSince !== undefined &&
      now - this.belowMinimumSince > this.options.joinTimeoutMs
    ) {
      this.abort(this.belowMinimumMessage());
    }
  }

  private belowMinimumMessage(): string {
    const { minNodes, maxNodes, joinTimeoutMs } = this.options;
    const present = [...this.entries.values()].map((entry) => entry.name);
    const missing =
      this.lost.length > 0
        ? `missing: ${this.lost.map((lost) => `${lost.description}, lost in round ${lost.round} (${lost.why})`).join('; ')}`
        : 'no launcher was lost; the others never joined';
    return (
      `fewer than ${minNodes} launchers (--nnodes ${minNodes}:${maxNodes}) for ${joinTimeoutMs / 1_000} s: ` +
      `${present.length} present (${present.join(', ') || 'none'}); ${missing}.`
    );
  }

  private loseLauncher(entry: LauncherEntry, why: string): void {
    if (!this.entries.delete(entry.id)) return;
    const description = this.describe(entry);
    const wasInRound = entry.nodeRank !== undefined;
    this.options.log(`rendezvous: lost launcher ${description}: ${why}.`);
    if (wasInRound) this.lost.push({ description, why, round: this.round });
    if (this.phase === 'running' && entry.state === 'member') {
      this.stopRound('lost', `lost ${description}: ${why}`);
      return;
    }
    this.formIfReady();
  }

  private stopRound(reason: StopReason, message: string): void {
    this.phase = 'stopping';
    const members = this.members();
    this.lastStop = { reason, message, members: members.map((member) => member.id) };
    this.options.log(`rendezvous: round ${this.round} stops (${reason}): ${message}.`);
    for (const member of members) {
      member.state = 'stopping';
      this.send(member, { type: 'stop', round: this.round, reason, message });
    }
    this.formIfReady();
  }

  /** Forms the next round when enough launchers wait and none is still stopping its workers. */
  private formIfReady(): void {
    if (this.phase === 'running' || this.phase === 'finished' || this.phase === 'aborted') return;
    const all = [...this.entries.values()];
    if (all.some((entry) => entry.state === 'stopping')) return;
    this.phase = 'forming';
    const waiting = all.filter((entry) => entry.state === 'waiting');
    if (waiting.length < this.options.minNodes) {
      this.belowMinimumSince ??= performance.now();
      clearTimeout(this.lastCall);
      this.lastCall = undefined;
      return;
    }
    this.belowMinimumSince = undefined;
    if (waiting.length >= this.options.maxNodes || this.options.lastCallMs === 0) {
      this.formRound();
      return;
    }
    this.lastCall ??= setTimeout(() => {
      this.lastCall = undefined;
      if (this.phase === 'forming') this.formRound();
    }, this.options.lastCallMs);
  }

  private formRound(): void {
    clearTimeout(this.lastCall);
    this.lastCall = undefined;
    const waiting = [...this.entries.values()]
      .filter((entry) => entry.state === 'waiting')
      .sort((a, b) => (a.nodeRank ?? Infinity) - (b.nodeRank ?? Infinity) || a.arrival - b.arrival);
    if (waiting.length < this.options.minNodes) {
      this.formIfReady();
      return;
    }
    const chosen = waiting.slice(0, this.options.maxNodes);
    const stop = this.lastStop;
    if (stop?.reason === 'failure' && stop.members.every((id) => chosen.some((entry) => entry.id === id))) {
      this.restartCount++;
      if (this.restartCount > this.options.maxRestarts) {
        this.abort(`job failed: ${stop.message} (after ${this.options.maxRestarts} restarts)`);
        return;
      }
    }
    this.lastStop = undefined;
    this.round++;
    this.phase = 'running';
    this.rankOffsets = new Map();
    const members: RoundMember[] = [];
    let rankOffset = 0;
    for (const [nodeRank, entry] of chosen.entries()) {
      entry.state = 'member';
      entry.done = false;
      entry.nodeRank = nodeRank;
      this.rankOffsets.set(entry.id, rankOffset);
      members.push({ name: entry.name, nodeRank, nproc: entry.nproc, rankOffset });
      rankOffset += entry.nproc;
    }
    const worldSize = rankOffset;
    this.options.log(
      `rendezvous: round ${this.round}: ${chosen.length} nodes, world size ${worldSize}, restarts ${this.restartCount} of ${this.options.maxRestarts}; ` +
        chosen.map((entry) => this.describe(entry)).join(', '),
    );
    for (const [nodeRank, entry] of chosen.entries()) {
      this.send(entry, {
        type: 'round',
        round: this.round,
        nodeRank,
        nnodes: chosen.length,
        worldSize,
        rankOffset: members[nodeRank]!.rankOffset,
        restartCount: this.restartCount,
        members,
        store: {
          host: this.options.store.host,
          port: this.options.store.port,
          prefix: `round-${this.round}/`,
        },
      });
    }
    for (const entry of waiting.slice(this.options.maxNodes)) {
      this.options.log(`rendezvous: ${entry.name} waits: round ${this.round} is full.`);
    }
  }

  private finish(): void {
    this.phase = 'finished';
    this.verdict = { type: 'finish' };
    this.options.log(`rendezvous: round ${this.round} finished: every worker exited 0.`);
    for (const entry of this.entries.values()) this.send(entry, { type: 'finish' });
    this.resolveOutcome({ kind: 'finished' });
  }

  private abort(message: string): void {
    this.phase = 'aborted';
    this.verdict = { type: 'abort', message };
    clearTimeout(this.lastCall);
    this.options.log(`rendezvous: the job ends: ${message}`);
    for (const entry of this.entries.values()) this.send(entry, { type: 'abort', message });
    this.resolveOutcome({ kind: 'aborted', message });
  }
}
