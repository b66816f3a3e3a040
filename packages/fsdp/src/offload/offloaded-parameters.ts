import { CheckpointError } from '@fsdp-ts/checkpoint';
import { throwIfAnyRankFailed } from '@fsdp-ts/checkpoint/internal';
import type { ProcessGroup } from '@fsdp-ts/collectives';
import type { FlatParamHandle } from '@fsdp-ts/flat-param';
import type { Storage } from '@fsdp-ts/tensor';
import { FsdpError } from '../errors';
import type { FsdpUnit } from '../internal/fsdp-unit';
import type { OffloadSettings } from './offload-settings';
import { createSlotStore, type OffloadStatistics, type SlotStore } from './offload-store';

/** What a unit asks of the parameter offload around its all-gather (see FsdpUnit.startUnshard). */
export interface ShardPager {
  /** Makes the unit's shards resident (read from the store and verified) before its all-gather reads them. */
  pageIn(unit: FsdpUnit): void;
  /** The all-gather is done: drops the unit's shards unless they hold values the store does not. */
  drop(unit: FsdpUnit): void;
}

/**
 * [Note: offloaded parameters]
 * `offload.parameters: 'disk'`: every sharded unit's local parameter shards (one chunk per flat
 * parameter, CRC-32 each) live in `directory/rank-<r>/parameters-{0,1}.bin`, two slots as in
 * [Note: offload slots]. The shards' storages are freed while the store holds them; the
 * Parameter views stay (a read of a dropped shard throws, it never sees stale memory).
 * Residency is all-or-nothing between two states, with one owner (this class):
 *   'resident' every shard is in memory and holds values the store does not (after construction,
 *     after a backward: the optimizer steps the shards; after a state dict, a load, a summon, a
 *     checkpoint: they read or write the shards). Gathers read the resident shards, drop nothing.
 *   'stored'   the store's current slot holds every shard; a unit's shards are read (and verified)
 *     just before its all-gather and dropped when it completes.
 * Transitions: settle (resident → stored) when a forward begins: every shard written into the
 * other slot and flushed, every rank agrees, the slot switches and the shards are freed; then the
 * current slot is verified on the I/O thread and every rank agrees, so a flipped byte is an
 * error on every rank before the step computes anything. makeResident (stored → resident) at the
 * end of every backward and before any idle method that touches the shards. A backward begins by
 * verifying the slot again (one agreement), so a byte changed after forward is an error on every
 * rank before any gradient. A read that fails during a gather (a byte changed mid-forward or
 * mid-backward) is kept, the unit gathers zeros in its place (every rank still issues the same
 * collectives) and every rank throws at the end of the backward, before the optimizer step, or at
 * the end of an evaluation forward.
 */
export class OffloadedParameters implements ShardPager {
  readonly #group: ProcessGroup;
  readonly #store: SlotStore;
  readonly #chunks = new Map<FlatParamHandle, number>();
  readonly #handles: FlatParamHandle[] = [];
  #state: 'resident' | 'stored' = 'resident';
  #allocated = false;
  #current: 0 | 1 = 0;
  /** A failed read during a gather, reported at the next agreement. */
  #failure: unknown;

  constructor(
    units: readonly FsdpUnit[],
    settings: OffloadSettings,
    group: ProcessGroup,
    readonly statistics: OffloadStatistics,
  ) {
    this.#group = group;
    const offsets = [0];
    for (const unit of units) {
      for (const handle of unit.handles) {
        this.#chunks.set(handle, this.#handles.length);
        this.#handles.push(handle);
        offsets.push(offsets[offsets.length - 1]! + handle.layout.shardNumel);
      }
    }
    this.#store = createSlotStore(
      'disk',
      offsets,
      {
        directory: settings.directory,
        rank: group.rank,
        syncBytes: settings.syncBytes,
        contents: 'parameters',
      },
      statistics,
    );
  }

  /** 'resident' or 'stored' (see [Note: offloaded parameters]). */
  get state(): 'resident' | 'stored' {
    return this.#state;
  }

  /** Bytes of parameter shards this rank keeps on disk (one slot). */
  get shardBytes(): number {
    return this.#handles.reduce((sum, handle) => sum + handle.layout.shardNumel * 4, 0);
  }

  /** When a forward begins (collective): resident → stored, then the stored shards verified. */
  settle(): void {
    if (this.#state === 'resident') {
      let failure: unknown;
      const other = this.#allocated ? this.#other : 0;
      try {
        if (!this.#allocated) {
          this.#store.allocate();
          this.#allocated = true;
        }
        this.#handles.forEach((handle, chunk) => {
          this.#store.write(other, chunk, storageOf(handle).array() as Float32Array);
        });
        this.#store.flush(other);
      } catch (error) {
        failure = error;
      }
      this.#agree(failure, 'writing the offloaded parameters');
      this.#current = other;
      for (const handle of this.#handles) storageOf(handle).free();
      this.#state = 'stored';
    }
    this.verify('verifying the offloaded parameters');
  }

  /** Verifies every stored shard on the I/O thread; every rank agrees (collective). */
  verify(phase: string): void {
    if (this.#state !== 'stored') {
      this.agreeOnReads(phase);
      return;
    }
    let failure: unknown = this.#failure;
    this.#failure = undefined;
    if (failure === undefined) {
      try {
        this.#store.drain();
        this.#store.prefetchVerify(this.#current);
        this.#store.verify(this.#current, new Float32Array(0));
      } catch (error) {
        failure = error;
      }
    }
    this.#agree(failure, phase);
  }

  /** Every rank throws if any rank's gather read failed since the last agreement (collective). */
  agreeOnReads(phase: string): void {
    const failure = this.#failure;
    this.#failure = undefined;
    try {
      this.#agree(failure, phase);
    } catch (error) {
      throw settled(error);
    }
  }

  /**
   * stored → resident: reads every shard back (the optimizer step, state dicts, checkpoints and
   * summonFullParams read or write them). `failures: 'throw'` throws the first failed read on this
   * rank (non-collective callers); 'keep' keeps it for the next agreement (the end of a backward).
   */
  makeResident(failures: 'throw' | 'keep'): void {
    if (this.#state === 'resident') return;
    this.#store.drain();
    let failure: unknown;
    this.#handles.forEach((handle, chunk) => {
      failure ??= this.#readInto(handle, chunk);
    });
    this.#state = 'resident';
    if (failure === undefined) return;
    if (failures === 'throw') throw failure;
    this.#failure ??= failure;
  }

  /**
   * At the end of a backward (collective): stored → resident for the optimizer step, then every
   * rank agrees that every read of this step verified. On any rank's failure the shards are
   * dropped again (the store, unchanged, stays the model) and every rank throws.
   */
  endBackward(): void {
    this.makeResident('keep');
    const failure = this.#failure;
    this.#failure = undefined;
    try {
      this.#agree(failure, 'reading the offloaded parameters');
    } catch (error) {
      for (const handle of this.#handles) storageOf(handle).free();
      this.#state = 'stored';
      throw settled(error);
    }
  }

  pageIn(unit: FsdpUnit): void {
    if (this.#state === 'resident') return;
    for (const handle of unit.handles) {
      const chunk = this.#chunks.get(handle)!;
      if (storageOf(handle).isAllocated) continue;
      this.#failure ??= this.#readInto(handle, chunk);
    }
  }

  drop(unit: FsdpUnit): void {
    if (this.#state === 'resident') return;
    for (const handle of unit.handles) storageOf(handle).free();
  }

  /** Removes the files (the model is done with them). */
  release(): void {
    this.makeResident('throw');
    this.#store.release();
    this.#allocated = false;
  }

  get #other(): 0 | 1 {
    return this.#current === 0 ? 1 : 0;
  }

  /** Allocates the shard and reads chunk `chunk` into it; a failure zero-fills it and is returned. */
  #readInto(handle: FlatParamHandle, chunk: number): unknown {
    const storage = storageOf(handle);
    if (!storage.isAllocated) storage.allocate({ zeroed: false });
    const into = storage.array() as Float32Array;
    try {
      this.#store.read(this.#current, chunk, into);
      return undefined;
    } catch (error) {
      into.fill(0);
      return error;
    }
  }

  /** Every rank learns whether any rank failed; each then throws (see [Note: collective failure] in @fsdp-ts/checkpoint). */
  #agree(local: unknown, phase: string): void {
    try {
      throwIfAnyRankFailed(this.#group, local, phase);
    } catch (error) {
      if (error instanceof CheckpointError && error.reason === 'peer-failed') {
        throw new FsdpError(error.message, {
          code: 'offload-failed',
          rank: this.#group.rank,
          ...(error.file === undefined ? {} : { file: error.file }),
          cause: error,
        });
      }
      throw error;
    }
  }
}

/**
 * An agreed failure inside a forward or backward, as a step failure already settled ([Note: step
 * failure]): every rank knows of it, so the step's settlement does not abort the group and the
 * next step (or a resume) can run.
 */
function settled(error: unknown): unknown {
  if (!(error instanceof FsdpError) || error.code === 'step-failed') return error;
  return new FsdpError(`The step failed on every rank: ${error.message} The process group stays usable.`, {
    code: 'step-failed',
    ...(error.rank === undefined ? {} : { rank: error.rank }),
    groupBroken: false,
    ...(error.file === undefined ? {} : { file: error.file }),
    cause: error,
    fix: 'check the disk under offload.directory (dmesg, smartctl), then resume from the last checkpoint (loadCheckpoint).',
  });
}

function storageOf(handle: FlatParamHandle): Storage {
  return handle.shardedBuffer().storage;
}
