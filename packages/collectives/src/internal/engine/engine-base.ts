import { CollectiveError } from '../../errors.js';
import type { CollectiveDtype, CollectiveKind, ReduceOp } from '../../types.js';
import { describeOp, type MainToWorkerMessage, type OpMessage } from '../op-message.js';

/**
 * [Note: engine base] What every backend shares inside the communication worker, so a backend is
 * its transport and schedules only: sequence numbers (one for collectives, one per peer and
 * direction for send/recv); `checkHeaders` (a difference fails the op with 'mismatch' before any
 * payload moves and leaves the group usable); the broken-group state (any other failure breaks
 * the group once, fails the running op, closes the transport so blocked peers fail too, and fails
 * every later op with the cause); timeouts ('timeout', naming `waitingOn()`; a transport that
 * blocks the thread checks its own deadline).
 *
 * [Note: abort] `group.abort(error)` sends an abort notice (this rank, its message) to every peer
 * and breaks the group here; a peer reading it calls `peerAborted` and breaks with code 'aborted'
 * naming the aborting rank. A notice read between ops (or by a waiting op) is seen as such; one
 * landing mid-payload fails that peer with 'peer-lost' naming the aborting rank. Every rank ends
 * broken. `recoverOrAbort` first asks whether all failed alike ([Note: failure agreement]).
 */
export abstract class EngineBase<Init extends EngineInit = EngineInit> implements Engine {
  private collectiveSeq = 0;
  private readonly sendSeq: number[];
  private readonly recvSeq: number[];
  private broken: CollectiveError | undefined;
  private abortSent = false;
  /** Fails the running op with the error that broke the group (before its transport reports it). */
  private failRunning: ((error: CollectiveError) => void) | undefined;

  constructor(protected readonly init: Init) {
    this.sendSeq = new Array<number>(init.size).fill(0);
    this.recvSeq = new Array<number>(init.size).fill(0);
  }

  protected abstract execute(op: OpMessage, seq: number): void | Promise<void>;

  /** Closes every connection of the transport, so peers blocked on this rank fail at once. */
  protected abstract closeTransport(): void;

  /** [Note: abort] */
  protected abstract sendAbort(message: string): void;

  /** [Note: failure agreement]: the first disagreement, or undefined; without notices, disagrees at once. */
  protected collectNotices(
    _notice: FailureNotice,
    _op: OpMessage,
    _judge: (peer: number, reply: NoticeReply) => string | undefined,
  ): Promise<string | undefined> | string | undefined {
    return `the ${this.init.backend} backend cannot agree on failures`;
  }

  abort(message: string): void {
    if (this.abortSent) return;
    this.abortSent = true;
    const error = this.abortedError(this.init.rank, message);
    if (this.broken === undefined) this.sendAbort(message);
    this.markBroken(error);
  }

  protected peerAborted(peer: number, message: string): CollectiveError {
    const error = this.abortedError(peer, message);
    // No close here: every peer hears the notice from the aborting rank itself.
    this.markBroken(error);
    return this.broken ?? error;
  }

  protected abortedError(peer: number, message: string): CollectiveError {
    const who = peer === this.init.rank ? 'this rank' : `rank ${peer}`;
    return new CollectiveError(
      `The group was aborted on rank ${this.init.rank} by ${who}: rank ${peer} failed with ${message}`,
      {
        code: 'aborted',
        rank: this.init.rank,
        peer,
        fix: `fix the failure on rank ${peer} first (a restart does not fix a bug in its code or data), then create a new group or restart the job from its last checkpoint (fsdp-run --max-restarts does it).`,
      },
    );
  }

  /** The peer the running op waits on, for timeout messages. */
  protected waitingOn(): number | undefined {
    return undefined;
  }

  control?(message: MainToWorkerMessage): void;

  abstract close(): void | Promise<void>;

  async run(op: OpMessage): Promise<void> {
    const seq = this.nextSeq(op);
    if (this.broken !== undefined) {
      const error = this.brokenError(op, seq);
      if (op.notice !== undefined) this.abort(op.notice.message);
      throw error;
    }
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(this.timeoutError(op, seq, this.waitingOn())), op.timeoutMs);
      this.failRunning = reject;
    });
    try {
      await Promise.race([op.notice === undefined ? this.execute(op, seq) : this.agree(op, seq), timeout]);
    } catch (error) {
      const failure = this.describeFailure(error, op, seq);
      // [Note: failure agreement] No agreement: abort with this rank's failure, as abort does.
      if (op.notice !== undefined) {
        this.abort(op.notice.message);
        throw failure;
      }
      // An abort notice reached this rank: the aborting rank tells every peer itself, so closing
      // here would only race its notice with a 'peer-lost' from this rank ([Note: abort]).
      if (failure.code === 'aborted') this.markBroken(failure);
      else if (failure.code !== 'mismatch') this.breakGroup(failure);
      throw failure;
    } finally {
      clearTimeout(timer);
      this.failRunning = undefined;
    }
  }

  private async agree(op: OpMessage, seq: number): Promise<void> {
    const mine: FailureNotice = { seq, fingerprint: op.notice!.fingerprint, message: op.notice!.message };
    let disagreeing: number | undefined;
    const reason = await this.collectNotices(mine, op, (peer, reply) => {
      const why = disagreement(mine, peer, reply);
      if (why !== undefined) disagreeing ??= peer;
      return why;
    });
    if (reason === undefined) return;
    throw new CollectiveError(
      `The ranks did not fail alike (seen on rank ${this.init.rank}): ${reason}. The group is aborted on every rank.`,
      {
        code: 'aborted',
        op: 'recoverOrAbort',
        rank: this.init.rank,
        ...(disagreeing === undefined ? {} : { peer: disagreeing }),
        fix: 'a failure only some ranks had (or had at different points) breaks the group: create a new group or restart the job.',
      },
    );
  }

  protected header(op: OpMessage, seq: number): OpHeader {
    return headerOf(op, seq);
  }

  protected checkHeaders(op: OpMessage, mine: OpHeader, received: readonly (OpHeader | null)[]): void {
    received.forEach((theirs, peer) => {
      if (theirs !== null && !sameOp(mine, theirs)) throw this.mismatch(op, mine, theirs, peer);
    });
  }

  protected mismatch(
    op: OpMessage,
    mine: OpHeader,
    theirs: OpHeader | string,
    peer: number,
  ): CollectiveError {
    const ours = describeOp(mine, mine.seq);
    const other = typeof theirs === 'string' ? theirs : describeOp(theirs, theirs.seq);
    return new CollectiveError(
      `Mismatched collective on rank ${this.init.rank}: it called ${ours} but rank ${peer} called ${other}.`,
      {
        code: 'mismatch',
        op: op.kind,
        rank: this.init.rank,
        peer,
        expected: ours,
        actual: other,
        fix: 'every rank of a group must issue the same ops, in the same order, with the same sizes, dtypes, reductions and roots.',
      },
    );
  }

  protected timeoutError(op: OpMessage, seq: number, peer: number | undefined, what = ''): CollectiveError {
    const who = peer === undefined ? 'its peers' : `rank ${peer}`;
    return new CollectiveError(
      `${describeOp(op, seq)} on rank ${this.init.rank} timed out after ${op.timeoutMs} ms waiting for ${who}${what}.`,
      {
        code: 'timeout',
        op: op.kind,
        rank: this.init.rank,
        ...(peer === undefined ? {} : { peer }),
        fix: `check whether ${who} died, stalled or issued a different sequence of ops; raise timeoutMs if it is just slow.`,
      },
    );
  }

  protected cancelledError(op: OpMessage, seq: number): CollectiveError {
    return new CollectiveError(
      `${describeOp(op, seq)} on rank ${this.init.rank} was cancelled: the group was destroyed.`,
      { code: 'closed', op: op.kind, rank: this.init.rank },
    );
  }

  /** Breaks the group once and fails the running op; the transport stays open. */
  protected markBroken(error: CollectiveError): void {
    if (this.broken !== undefined) return;
    this.broken = error;
    this.failRunning?.(error);
  }

  /** [Note: engine base] Breaks the group and closes the transport. */
  protected breakGroup(error: CollectiveError): void {
    this.markBroken(error);
    this.closeTransport();
  }

  protected isBroken(): boolean {
    return this.broken !== undefined;
  }

  protected collectivesRun(): number {
    return this.collectiveSeq;
  }

  private nextSeq(op: OpMessage): number {
    if (op.kind === 'send') return ++this.sendSeq[op.peer]!;
    if (op.kind === 'recv') return ++this.recvSeq[op.peer]!;
    return ++this.collectiveSeq;
  }

  private describeFailure(error: unknown, op: OpMessage, seq: number): CollectiveError {
    if (error instanceof CollectiveError && error.op !== undefined) return error;
    if (error instanceof CollectiveError) {
      const peer = error.peer === undefined ? '' : ` (peer rank ${error.peer})`;
      return new CollectiveError(
        `${describeOp(op, seq)} on rank ${this.init.rank} failed${peer}: ${withoutFix(error)}`,
        {
          code: error.code,
          op: op.kind,
          rank: this.init.rank,
          ...(error.peer === undefined ? {} : { peer: error.peer }),
          cause: error,
          fix:
            error.fix ??
            'a peer died or the network failed; restart the job (fsdp-run --max-restarts does it).',
        },
      );
    }
    return new CollectiveError(`${describeOp(op, seq)} on rank ${this.init.rank} failed: ${String(error)}`, {
      code: 'closed',
      op: op.kind,
      rank: this.init.rank,
      cause: error,
    });
  }

  private brokenError(op: OpMessage, seq: number): CollectiveError {
    const cause = this.broken!;
    return new CollectiveError(
      `${describeOp(op, seq)} on rank ${this.init.rank} cannot run: the group failed earlier (${cause.message}).`,
      {
        code: cause.code === 'timeout' ? 'peer-lost' : cause.code,
        op: op.kind,
        rank: this.init.rank,
        ...(cause.peer === undefined ? {} : { peer: cause.peer }),
        cause,
        fix: 'destroy this group and restart the job (or the group).',
      },
    );
  }
}

/** The error's message without its " Fix: ..." tail (the wrapping error states the fix once). */
function withoutFix(error: CollectiveError): string {
  const tail = error.fix === undefined ? '' : ` Fix: ${error.fix}`;
  return tail !== '' && error.message.endsWith(tail) ? error.message.slice(0, -tail.length) : error.message;
}

/** What every rank states about an op before any payload moves (tcp: [Note: op header]). */
export interface OpHeader {
  kind: CollectiveKind;
  dtype: CollectiveDtype;
  wireDtype: 'float32' | 'bfloat16';
  reduceOp: ReduceOp;
  /** Per group for collectives; per peer and direction for send/recv. */
  seq: number;
  /** broadcast: the root; otherwise -1. */
  root: number;
  /** send: the destination; recv: the source; otherwise -1. */
  peer: number;
  count: number;
}

export function headerOf(op: OpMessage, seq: number): OpHeader {
  return {
    kind: op.kind,
    dtype: op.dtype,
    wireDtype: op.wireDtype,
    reduceOp: op.reduceOp,
    seq,
    root: op.root,
    peer: op.peer,
    count: op.count,
  };
}

/** The header a `send` must carry for this rank's `recv`. */
export function expectedSendHeader(recv: OpHeader, receiver: number): OpHeader {
  return { ...recv, kind: 'send', peer: receiver };
}

export function sameOp(mine: OpHeader, theirs: OpHeader): boolean {
  const reduces = mine.kind === 'allReduce' || mine.kind === 'reduceScatter';
  return (
    mine.kind === theirs.kind &&
    mine.dtype === theirs.dtype &&
    mine.wireDtype === theirs.wireDtype &&
    (!reduces || mine.reduceOp === theirs.reduceOp) &&
    mine.seq === theirs.seq &&
    mine.root === theirs.root &&
    mine.peer === theirs.peer &&
    mine.count === theirs.count
  );
}

/**
 * [Note: failure agreement]
 * `group.recoverOrAbort(error)` keeps the group when every rank failed alike outside the
 * collectives. It is an op in the queue: the rank sends every peer a failure notice (its sequence
 * number, one more than the collectives it issued, and the failure's fingerprint) where the
 * peer's next op header belongs, and reads one reply from each. Every reply a notice with the
 * same number and fingerprint: the group goes on, 'recovered' on every rank. Anything else (an op
 * header, another number or fingerprint, an abort or loss, a lost connection, the timeout): the
 * rank aborts as `group.abort` does and returns the reason; every failing rank reads every reply,
 * so each sees the disagreement. A rank that did not fail and reads a notice where a header
 * belongs breaks at once ('aborted', `peer` the failing rank) and sends nothing. A failing rank
 * waits at most the op timeout. Send and recv are not compared.
 */
export interface FailureNotice {
  seq: number;
  fingerprint: string;
  /** The abort message if the ranks cannot agree. */
  message: string;
}

export type NoticeReply = { type: 'notice'; notice: FailureNotice } | { type: 'op'; header: OpHeader };

/** Why `reply` from `peer` disagrees with `mine`; undefined when it agrees. */
export function disagreement(mine: FailureNotice, peer: number, reply: NoticeReply): string | undefined {
  if (reply.type === 'op')
    return `rank ${peer} did not fail there: it issued ${reply.header.kind} #${reply.header.seq}`;
  const theirs = reply.notice;
  if (theirs.seq !== mine.seq)
    return `rank ${peer} failed after ${theirs.seq - 1} collectives on the group, this rank after ${mine.seq - 1}`;
  if (theirs.fingerprint !== mine.fingerprint)
    return `rank ${peer} failed with another error: ${theirs.message}`;
  return undefined;
}

/** The communication worker's workerData, whatever the backend. */
export interface EngineInit {
  backend: string;
  rank: number;
  size: number;
  /** Slot 0 becomes 1 when the main thread destroys the group. */
  abort: Int32Array;
  /** The departure word ([Note: process exit]), set by CommunicationClient.start. */
  departure?: Int32Array;
  /** For backends registered from outside: a module exporting `createEngine`. */
  engineModule?: string;
}

export interface EngineContext {
  notify(message: unknown): void;
}

/** A backend inside the communication worker: one op at a time, in issue order. */
export interface Engine {
  run(op: OpMessage): Promise<void>;
  control?(message: MainToWorkerMessage): void;
  abort(message: string): void;
  /** A normal exit after every queued op: tell the peers ([Note: clean departure]). */
  depart?(): void | Promise<void>;
  close(): void | Promise<void>;
}

export interface EngineModule {
  createEngine(init: EngineInit, context: EngineContext): Engine;
}
