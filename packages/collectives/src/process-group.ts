import { CollectiveError } from './errors.js';
import { checkAliasing } from './internal/aliasing.js';
import type { BackendDefinition, GroupSetup, OwnedResource } from './internal/backend-definition.js';
import { checkCollectiveOptionKeys, opOptionKeys, torchOpNames } from './internal/check-option-keys.js';
import type { CommunicationClient } from './internal/communication-client.js';
import { describeOp, type OpMessage } from './internal/op-message.js';
import { threadRankContext } from './internal/shm/thread-rank-context.js';
import { createStatusWord } from './internal/status-word.js';
import {
  checkLengths,
  checkRank,
  checkReduceOp,
  checkSameDtype,
  checkWireDtype,
  resolveDtype,
  stage,
} from './internal/validate-op.js';
import type {
  Backend,
  BroadcastOptions,
  CollectiveBuffer,
  CollectiveDtype,
  CollectiveKind,
  OpOptions,
  ReduceOp,
  ReduceOptions,
  WireOptions,
} from './types.js';
import { Work } from './work.js';

type GroupState = 'active' | 'destroyed';

/** What `recoverOrAbort` found: every rank failed alike (the group is usable), or why not (it is aborted). */
export type FailureAgreement = { recovered: true } | { recovered: false; reason: CollectiveError };

/**
 * A set of ranks that run collectives together. Every op returns a Work at once and runs on the
 * group's communication worker, in issue order; every rank of the group must issue the same ops
 * in the same order. Buffers must not be touched until the op's Work has completed.
 */
export class ProcessGroup {
  private state: GroupState = 'active';
  private readonly subgroupCounts = new Map<string, number>();

  /** @internal use initProcessGroup / newGroup */
  constructor(
    private readonly setup: GroupSetup,
    private readonly definition: BackendDefinition<unknown>,
    private readonly client: CommunicationClient,
    /** Resources this group closes on destroy (the world group's store client and server). */
    private readonly owned: readonly OwnedResource[] = [],
  ) {}

  /** This process's rank in the group, 0 <= rank < size. */
  get rank(): number {
    return this.setup.rank;
  }

  /** The number of ranks in the group. */
  get size(): number {
    return this.setup.size;
  }

  /** The name of the backend this group runs on ('tcp', 'shm' or a registered one). */
  get backend(): Backend {
    return this.setup.backend;
  }

  /** The world rank of each rank of this group. */
  get worldRanks(): readonly number[] {
    return this.setup.worldRanks;
  }

  /** In place: every rank's `buffer` becomes the element-wise reduction over all ranks. */
  allReduce(buffer: CollectiveBuffer, options: ReduceOptions = {}): Work {
    const { dtype, reduceOp } = this.prepare('allReduce', options, buffer);
    const staged = stage(buffer, true);
    const fields = { dtype, reduceOp, count: buffer.length, input: null, output: staged.shared };
    return this.issue('allReduce', options, fields, staged.copyBack);
  }

  /**
   * output = concatenation of every rank's input, rank-major (output.length = size x input.length).
   * In place when `input` is this rank's block of `output`
   * (`output.subarray(rank * n, (rank + 1) * n)`): the shm backend then skips copying it; any
   * other overlap is refused ([Note: in-place all-gather and reduce-scatter]).
   */
  allGather(output: CollectiveBuffer, input: CollectiveBuffer, options: OpOptions & WireOptions = {}): Work {
    return this.blockwise('allGather', output, input, options);
  }

  /**
   * output = block `rank` of the reduction of every rank's input (input.length = size x
   * output.length). In place when `output` is this rank's block of `input`
   * (`input.subarray(rank * n, (rank + 1) * n)`): the shm backend then reduces into it where it
   * lives on arena buffers; any other overlap is refused ([Note: in-place all-gather and
   * reduce-scatter]).
   */
  reduceScatter(output: CollectiveBuffer, input: CollectiveBuffer, options: ReduceOptions = {}): Work {
    return this.blockwise('reduceScatter', output, input, options);
  }

  /** Every rank's `buffer` becomes the root's. */
  broadcast(buffer: CollectiveBuffer, options: BroadcastOptions = {}): Work {
    const { dtype } = this.prepare('broadcast', options, buffer);
    const root = options.root ?? 0;
    checkRank('broadcast', this.rank, root, this.size, 'root', true);
    const staged = stage(buffer, true);
    const fields = { dtype, root, count: buffer.length, input: null, output: staged.shared };
    return this.issue('broadcast', options, fields, staged.copyBack);
  }

  /** Completes once every rank of the group has reached it. */
  barrier(options: OpOptions = {}): Work {
    checkCollectiveOptionKeys(`barrier`, options, opOptionKeys.barrier, torchOpNames);
    return this.issue('barrier', options, { dtype: 'int32', count: 0, input: null, output: null }, undefined);
  }

  /** Sends `buffer` to `peer`, which must call recv with the same length and dtype. */
  send(buffer: CollectiveBuffer, peer: number, options: OpOptions = {}): Work {
    return this.pointToPoint('send', buffer, peer, options);
  }

  /** Receives into `buffer` what `peer` sends. */
  recv(buffer: CollectiveBuffer, peer: number, options: OpOptions = {}): Work {
    return this.pointToPoint('recv', buffer, peer, options);
  }

  /**
   * A group of some of this group's ranks (given as ranks of this group, any order; the new
   * group's rank i is ranks[i] sorted ascending). Only the members call it, each the same number
   * of times for the same rank set. Hybrid sharding uses it: 4 ranks as 2 x 2 are newGroup([0, 1]),
   * newGroup([2, 3]) for sharding and newGroup([0, 2]), newGroup([1, 3]) for replication.
   */
  async newGroup(ranks: readonly number[]): Promise<ProcessGroup> {
    this.checkActive('newGroup');
    const members = [...new Set(ranks)].sort((a, b) => a - b);
    for (const member of members) checkRank('newGroup', this.rank, member, this.size, 'member', true);
    const rank = members.indexOf(this.rank);
    if (rank < 0 || members.length !== ranks.length) {
      throw new CollectiveError(
        `newGroup([${ranks.join(', ')}]) on rank ${this.rank}: ranks must be distinct and include the caller.`,
        {
          code: 'invalid-argument',
          rank: this.rank,
          expected: `distinct ranks including ${this.rank}`,
          actual: ranks,
          fix: 'call newGroup only on member ranks, with each rank listed once.',
        },
      );
    }
    const name = members.join('-');
    const nth = (this.subgroupCounts.get(name) ?? 0) + 1;
    this.subgroupCounts.set(name, nth);
    const setup: GroupSetup = {
      ...this.setup,
      rank,
      size: members.length,
      key: `${this.setup.key}/group-${name}-${nth}`,
      worldRanks: members.map((member) => this.setup.worldRanks[member]!),
    };
    return new ProcessGroup(setup, this.definition, await this.definition.start(setup));
  }

  /**
   * Declares the group broken on every rank because this rank failed with `error` outside the
   * collectives (see [Note: abort]): every peer's running and later ops fail at once with a
   * CollectiveError (code 'aborted') naming this rank and the error's message, and so do this
   * rank's. Call it when an exception on this rank leaves the ranks unable to issue the same ops;
   * the group cannot be used again (destroy it; restart from a checkpoint). Safe to call twice.
   * Where every rank may have failed alike, `recoverOrAbort(error)` keeps the group if they did.
   */
  abort(error: unknown): void {
    if (this.state !== 'active') return;
    this.client.post({ type: 'abort', message: describeAbortCause(error) });
  }

  /**
   * After a failure outside the collectives (an exception in this rank's own code): keeps the group
   * if every rank failed alike, aborts it otherwise ([Note: failure agreement]). Collective in the
   * sense that it runs after every op this rank issued: it tells every peer its failure (the
   * number of collectives issued so far and the error's fingerprint, see `failureFingerprint`)
   * and waits, at most `timeoutMs`, for every peer's. All equal: returns `{ recovered: true }`,
   * nothing was aborted and the group is usable, the same on every rank. Anything else (a peer
   * that did not fail, or failed at another point or with another error, a broken group, the
   * timeout): aborts as `abort(error)` does and returns the reason. Blocks the calling thread.
   */
  recoverOrAbort(error: unknown, options: OpOptions = {}): FailureAgreement {
    if (this.state !== 'active') {
      return {
        recovered: false,
        reason: new CollectiveError(`recoverOrAbort on rank ${this.rank}: the group was destroyed.`, {
          code: 'closed',
          op: 'recoverOrAbort',
          rank: this.rank,
        }),
      };
    }
    const work = this.issue(
      'barrier',
      options,
      { dtype: 'int32', count: 0, input: null, output: null },
      undefined,
      { fingerprint: failureFingerprint(error), message: describeAbortCause(error) },
    );
    try {
      work.wait();
      return { recovered: true };
    } catch (reason) {
      return { recovered: false, reason: reason as CollectiveError };
    }
  }

  /**
   * Stops the communication worker after its current op, closes its sockets and joins it. Ops
   * still queued fail with code 'closed'. Safe to call twice and on error paths.
   */
  async destroy(): Promise<void> {
    if (this.state === 'destroyed') return;
    if (this.owned.length > 0 && this.client.isUsable()) {
      // [Note: store lifetime] rank 0 may run the store; let every rank get here before it closes.
      await new Promise<void>((resolve) => {
        this.barrier({ timeoutMs: Math.min(this.setup.timeoutMs, 10_000) }).then(resolve, () => resolve());
      });
    }
    this.state = 'destroyed';
    try {
      await this.client.destroy();
    } finally {
      for (const resource of [...this.owned].reverse()) await resource.close().catch(() => undefined);
    }
  }

  /** The checks every buffer op starts with: its option keys, its dtype and, where it reduces, its op. */
  private prepare(
    kind: CollectiveKind,
    options: ReduceOptions,
    buffer: CollectiveBuffer,
  ): { dtype: CollectiveDtype; reduceOp: ReduceOp } {
    checkCollectiveOptionKeys(kind, options, opOptionKeys[kind as keyof typeof opOptionKeys], torchOpNames);
    const dtype = resolveDtype(kind, this.rank, buffer, options.dtype);
    const reduceOp = options.op ?? 'sum';
    if (kind === 'allReduce' || kind === 'reduceScatter') checkReduceOp(kind, this.rank, reduceOp, dtype);
    return { dtype, reduceOp };
  }

  /** allGather and reduceScatter: one buffer holds `size` blocks of the other's length. */
  private blockwise(
    kind: 'allGather' | 'reduceScatter',
    output: CollectiveBuffer,
    input: CollectiveBuffer,
    options: ReduceOptions,
  ): Work {
    const { dtype, reduceOp } = this.prepare(kind, options, input);
    checkSameDtype(kind, this.rank, output, input);
    const [whole, block] = kind === 'allGather' ? ['output', 'input'] : ['input', 'output'];
    const [wholeLength, blockLength] =
      kind === 'allGather' ? [output.length, input.length] : [input.length, output.length];
    checkLengths(
      kind,
      this.rank,
      wholeLength,
      this.size * blockLength,
      `${whole} length must be size x ${block} length`,
    );
    checkAliasing(kind, this.rank, output, input, threadRankContext()?.arena ?? null);
    const [stagedInput, stagedOutput] = [stage(input, false), stage(output, true)];
    const fields = {
      dtype,
      reduceOp,
      count: blockLength,
      input: stagedInput.shared,
      output: stagedOutput.shared,
    };
    return this.issue(kind, options, fields, stagedOutput.copyBack);
  }

  private pointToPoint(
    kind: 'send' | 'recv',
    buffer: CollectiveBuffer,
    peer: number,
    options: OpOptions,
  ): Work {
    const { dtype } = this.prepare(kind, options, buffer);
    checkRank(kind, this.rank, peer, this.size, 'peer', false);
    const staged = stage(buffer, kind === 'recv');
    const [input, output] = kind === 'send' ? [staged.shared, null] : [null, staged.shared];
    return this.issue(kind, options, { dtype, peer, count: buffer.length, input, output }, staged.copyBack);
  }

  private issue(
    kind: CollectiveKind,
    options: OpOptions & WireOptions,
    fields: Pick<OpMessage, 'dtype' | 'count' | 'input' | 'output'> &
      Partial<Pick<OpMessage, 'reduceOp' | 'root' | 'peer'>>,
    copyBack: (() => void) | undefined,
    notice?: OpMessage['notice'],
  ): Work {
    this.checkActive(kind);
    const wireDtype = options.wireDtype ?? 'float32';
    checkWireDtype(kind, this.rank, wireDtype, fields.dtype);
    const timeoutMs = options.timeoutMs ?? this.setup.timeoutMs;
    const op: OpMessage = {
      type: 'op',
      kind,
      wireDtype,
      reduceOp: fields.reduceOp ?? 'sum',
      root: fields.root ?? -1,
      peer: fields.peer ?? -1,
      dtype: fields.dtype,
      count: fields.count,
      input: fields.input,
      output: fields.output,
      status: createStatusWord(),
      timeoutMs,
      ...(notice === undefined ? {} : { notice }),
    };
    this.client.post(op);
    return new Work(op.status, `${describeOp(op)} on rank ${this.rank}`, timeoutMs, copyBack, () =>
      this.client.settled(op.status),
    );
  }

  private checkActive(what: string): void {
    if (this.state !== 'active') {
      throw new CollectiveError(`${what} on rank ${this.rank}: the group was destroyed.`, {
        code: 'closed',
        op: what,
        rank: this.rank,
        fix: 'issue ops before destroy(), or create a new group.',
      });
    }
  }
}

/** The longest abort message sent to peers, in characters (longer ones are cut). */
const ABORT_MESSAGE_CHARS = 4_000;

function describeAbortCause(error: unknown): string {
  const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return text.length > ABORT_MESSAGE_CHARS ? `${text.slice(0, ABORT_MESSAGE_CHARS)}…` : text;
}

/**
 * What ranks compare to tell whether they failed alike ([Note: failure agreement]): the error's
 * name, its `code` if it has one, and its message. Errors whose message names the rank differ.
 */
export function failureFingerprint(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as { code?: unknown }).code;
  return `${error.name}|${typeof code === 'string' ? code : ''}|${error.message}`;
}
