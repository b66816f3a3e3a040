import { CheckpointError, type StreamedValues } from '@fsdp-ts/checkpoint';
import { type OptimizerStateSource, throwIfAnyRankFailed } from '@fsdp-ts/checkpoint/internal';
import type { ProcessGroup } from '@fsdp-ts/collectives';
import type { OffloadedStateEntry, OptimizerStateOffload } from '@fsdp-ts/optim';
import { FsdpError } from '../errors';
import type { OffloadSettings } from './offload-settings';
import {
  createSlotStore,
  type OffloadStatistics,
  resetOffloadStatistics,
  type SlotStore,
} from './offload-store';

/** Where one entry's buffers sit in the slots: its chunk, and its first element within the chunk. */
interface EntryPlace {
  chunk: number;
  start: number; // elements from the chunk's start; buffer k at start + k·numel
  numel: number;
  names: readonly string[];
}

/**
 * [Note: offloaded step]
 * The optimizer's side of a step is [Note: offloaded optimizer state] in @fsdp-ts/optim; this is
 * FSDP's. States: 'detached' (no optimizer yet) → 'idle' ⇄ 'stepping'.
 *   beginStep: allocate the slots if this is the first step (a full disk fails here), then read
 *     and verify every chunk of the current slot; one agreement across the group after each, so
 *     a rank's failure is every rank's error before any parameter changes.
 *   forEachResident: chunk by chunk into one resident buffer, from the current slot (or, after a
 *     pass that wrote, from the other slot, which holds this step's state); a writing pass writes
 *     each chunk into the other slot after visiting it. A failure is kept, the pass stops and
 *     returns (every rank must still reach the optimizer's collectives and endStep).
 *   endStep: flush the other slot, agree; on success it becomes current ([Note: offload slots]).
 * Chunks hold whole entries (an entry larger than a chunk is a chunk by itself), so the optimizer's
 * kernels get the very arrays, call for call, they would get without offload.
 */
export class OffloadedOptimizerState implements OptimizerStateOffload {
  #state: 'detached' | 'idle' | 'stepping' = 'detached';
  #store: SlotStore | null = null;
  #allocated = false;
  #current: 0 | 1 = 0;
  #places: EntryPlace[] = [];
  /** Element offsets of the chunks in a slot: chunk c is [offsets[c], offsets[c + 1]). */
  #offsets: number[] = [0];
  /**
   * Two resident chunk buffers (shared memory: the I/O thread fills one while the other is
   * stepped), made once and kept. Made per step and dropped after it, the rank's array buffers
   * grew by 0.1–0.3 GiB a step at 1.3 B (bench:scale) until the cap stopped the run: a
   * SharedArrayBuffer's memory is freed only once every thread that saw it has collected its
   * references, and the I/O thread, which allocates almost nothing, rarely collects.
   */
  #resident: [Float32Array, Float32Array] = [new Float32Array(0), new Float32Array(0)];
  /** Which of the two `#buffersOf` and `#chunkView` use. */
  #active: 0 | 1 = 0;
  /** Statistics were reset when backward began (prefetch), so beginStep keeps them. */
  #statisticsFresh = false;
  /** With 'stepping': whether a pass has written the other slot (later passes read it). */
  #written = false;
  #failure: unknown;
  /** The chunk `#resident` holds outside a step (state dicts read entry by entry), or -1. */
  #cachedChunk = -1;
  /** The optimizer attached (set by the model once `offloadState` succeeded), or null. */
  optimizer: object | null = null;

  constructor(
    private readonly settings: OffloadSettings,
    private readonly group: ProcessGroup,
    readonly statistics: OffloadStatistics,
  ) {}

  get attached(): boolean {
    return this.#state !== 'detached';
  }

  /** Bytes of optimizer state this rank keeps offloaded (one slot). */
  get stateBytes(): number {
    return this.#offsets[this.#offsets.length - 1]! * 4;
  }

  attach(entries: readonly OffloadedStateEntry[]): void {
    if (this.#state !== 'detached') {
      throw new FsdpError('model.offloadOptimizerState: an optimizer is already attached to this model.', {
        code: 'wrong-state',
        expected: 'one optimizer per model with offloaded state',
        actual: 'a second optimizer',
        fix: 'build one optimizer over model.parameters() (param groups give parts their own hyperparameters).',
      });
    }
    const limit = Math.max(1, Math.floor(this.settings.chunkBytes / 4));
    const offsets = [0];
    let chunkStart = 0;
    let cursor = 0;
    for (const entry of entries) {
      const size = entry.numel * entry.bufferNames.length;
      if (cursor > chunkStart && cursor + size - chunkStart > limit) {
        offsets.push(cursor);
        chunkStart = cursor;
      }
      this.#places.push({
        chunk: offsets.length - 1,
        start: cursor - chunkStart,
        numel: entry.numel,
        names: entry.bufferNames,
      });
      cursor += size;
    }
    if (cursor > chunkStart || offsets.length === 1) offsets.push(cursor);
    this.#offsets = offsets;
    let largest = 0;
    for (let chunk = 0; chunk + 1 < offsets.length; chunk++)
      largest = Math.max(largest, offsets[chunk + 1]! - offsets[chunk]!);
    this.#resident = [sharedFloat32Array(largest), sharedFloat32Array(largest)];
    this.#store = createSlotStore(
      this.settings.optimizerState === 'disk' ? 'disk' : 'memory',
      offsets,
      { directory: this.settings.directory, rank: this.group.rank, syncBytes: this.settings.syncBytes },
      this.statistics,
    );
    this.#state = 'idle';
  }

  /**
   * Starts verifying the current slot on the I/O thread (disk), so the step's verification
   * overlaps backward; FSDP calls it when a backward begins. Resets the statistics.
   */
  prefetch(): void {
    if (this.#state !== 'idle' || !this.#allocated) return;
    resetOffloadStatistics(this.statistics);
    this.#statisticsFresh = true;
    this.#cachedChunk = -1;
    this.#store!.prefetchVerify(this.#current);
  }

  beginStep(): void {
    this.#expect('idle', 'beginStep');
    if (!this.#statisticsFresh) resetOffloadStatistics(this.statistics);
    this.#statisticsFresh = false;
    this.#cachedChunk = -1;
    this.#agree(this.#tryAllocate(), 'allocating the offloaded optimizer state');
    let failure: unknown;
    try {
      this.#active = 0;
      this.#store!.verify(this.#current, this.#resident[0]);
    } catch (error) {
      failure = error;
    }
    this.#agree(failure, 'verifying the offloaded optimizer state');
    this.#state = 'stepping';
    this.#written = false;
    this.#failure = undefined;
  }

  forEachResident(
    writes: boolean,
    visit: (index: number, buffers: ReadonlyMap<string, Float32Array>) => void,
  ): void {
    this.#expect('stepping', 'forEachResident');
    if (this.#failure !== undefined) return;
    const source = this.#written ? this.#other : this.#current;
    const store = this.#store!;
    let index = 0;
    try {
      // Chunk c is stepped in buffer c mod 2 while the I/O thread writes chunk c - 1 from the other
      // buffer and then reads chunk c + 1 into it ([Note: offload I/O thread]: in that order).
      store.startRead(source, 0, this.#chunkView(0, 0));
      for (let chunk = 0; chunk < this.#chunkCount; chunk++) {
        const buffer = (chunk % 2) as 0 | 1;
        store.finishRead(source, chunk, this.#chunkView(chunk, buffer));
        if (chunk + 1 < this.#chunkCount) {
          store.startRead(source, chunk + 1, this.#chunkView(chunk + 1, buffer === 0 ? 1 : 0));
        }
        this.#active = buffer;
        for (; index < this.#places.length && this.#places[index]!.chunk === chunk; index++) {
          visit(index, this.#buffersOf(index));
        }
        // Written on the I/O thread while the next chunk steps ([Note: offload I/O thread]).
        if (writes) store.startWrite(this.#other, chunk, this.#chunkView(chunk, buffer));
      }
      if (writes) store.finishWrites();
    } catch (error) {
      store.drain();
      // The store's errors (a chunk that does not verify, a failed write) stop the pass; endStep
      // reports them on every rank. Anything else is the optimizer's: it propagates.
      if (!(error instanceof FsdpError)) throw error;
      this.#failure = error;
      return;
    }
    if (writes) this.#written = true;
  }

  endStep(failure: unknown): void {
    this.#expect('stepping', 'endStep');
    let local = failure ?? this.#failure;
    if (local === undefined && this.#written) {
      try {
        this.#store!.flush(this.#other);
      } catch (error) {
        local = error;
      }
    }
    const written = this.#written;
    this.#state = 'idle';
    this.#written = false;
    this.#failure = undefined;
    this.#cachedChunk = -1;
    this.#agree(local, 'the optimizer step over offloaded state');
    if (written) this.#current = this.#other;
  }

  read(index: number, name: string): Float32Array {
    this.#expect('idle', 'read');
    const place = this.#places[index]!;
    const position = place.names.indexOf(name);
    if (position < 0) return new Float32Array(place.numel);
    if (!this.#allocated) return new Float32Array(place.numel);
    if (this.#cachedChunk !== place.chunk) {
      this.#cachedChunk = -1;
      this.#readChunk(this.#current, place.chunk);
      this.#cachedChunk = place.chunk;
    }
    return this.#buffersOf(index).get(name)!.slice();
  }

  write(values: readonly { index: number; name: string; values: Float32Array }[]): void {
    this.#expect('idle', 'write');
    this.#store?.drain();
    this.#cachedChunk = -1;
    const allocation = this.#tryAllocate();
    if (allocation !== undefined) throw allocation;
    const byChunk = new Map<number, typeof values>();
    for (const value of values) {
      const place = this.#places[value.index]!;
      if (value.values.length !== place.numel || !place.names.includes(value.name)) {
        throw new FsdpError(
          `Offloaded optimizer state: entry ${value.index} '${value.name}' has ${value.values.length} elements; the offload keeps ${place.numel} of ${place.names.join(', ')}.`,
          { code: 'state-dict-mismatch', expected: place.numel, actual: value.values.length },
        );
      }
      byChunk.set(place.chunk, [...(byChunk.get(place.chunk) ?? []), value]);
    }
    // Every chunk into the other slot (patched where given), then switch: [Note: offload slots].
    for (let chunk = 0; chunk < this.#chunkCount; chunk++) {
      this.#readChunk(this.#current, chunk);
      for (const value of byChunk.get(chunk) ?? [])
        this.#buffersOf(value.index).get(value.name)!.set(value.values);
      this.#store!.write(this.#other, chunk, this.#chunkView(chunk));
    }
    this.#store!.flush(this.#other);
    this.#current = this.#other;
  }

  /**
   * [Note: offloaded state in checkpoints]
   * A checkpoint of offloaded state holds no copy of it ([Note: streamed values] in
   * @fsdp-ts/checkpoint). Saving: each buffer of each entry is streamed from the current slot
   * through the first resident chunk buffer (the one the step uses; nothing else is allocated):
   * the entry's chunk is read and verified (CRC-32) unless it is already there, and the writer
   * gets a view of the entry's buffer in it. The writer visits entries shard by shard and buffer
   * by buffer, so a chunk is read up to once per buffer name; memory stays one chunk.
   * Loading ([Note: loads in batches]): after the ranks agree, chunk by chunk, the first resident
   * buffer is zeroed (state the checkpoint lacks starts as zeros, as without offload), the
   * checkpoint's values are read into views of it, and the chunk is written into the other slot;
   * when every chunk is written the slot is flushed and becomes current ([Note: offload slots]).
   * A load that fails part-way leaves the current slot as it was. Both are idle-only.
   */
  checkpointSource(): OptimizerStateSource {
    return {
      bufferNames: (index) => this.#places[index]!.names,
      values: (index, name): StreamedValues => ({
        length: this.#places[index]!.numel,
        stream: (sink) => sink(this.#residentEntry(index, name)),
      }),
    };
  }

  /** The number of chunks in a slot (load batches). */
  get chunkCount(): number {
    return this.#offsets.length - 1;
  }

  /** Entry `index`'s chunk, its element count and buffer names. */
  entry(index: number): { chunk: number; numel: number; names: readonly string[] } {
    const { chunk, numel, names } = this.#places[index]!;
    return { chunk, numel, names };
  }

  /** Before a load's agreement: allocates the slots (a full disk fails the load on every rank before anything changes). */
  prepareLoad(): void {
    this.#expect('idle', 'prepareLoad');
    this.#store?.drain();
    this.#cachedChunk = -1;
    const allocation = this.#tryAllocate();
    if (allocation !== undefined) throw allocation;
  }

  /** Where a load reads entry `index`'s buffer `name`: a view of the first resident buffer (valid in its chunk's batch). */
  loadTarget(index: number, name: string): Float32Array {
    this.#active = 0;
    return this.#buffersOf(index).get(name)!;
  }

  /** Readies the first resident buffer for chunk `chunk` of a load: zeros. */
  beginLoadChunk(chunk: number): void {
    this.#expect('idle', 'beginLoadChunk');
    this.#cachedChunk = -1;
    this.#chunkView(chunk, 0).fill(0);
  }

  /** Writes what the load read for chunk `chunk` into the other slot. */
  endLoadChunk(chunk: number): void {
    this.#expect('idle', 'endLoadChunk');
    this.#store!.write(this.#other, chunk, this.#chunkView(chunk, 0));
  }

  /** Every chunk was written: flushes the other slot, which becomes current. */
  finishLoad(): void {
    this.#expect('idle', 'finishLoad');
    this.#store!.flush(this.#other);
    this.#current = this.#other;
  }

  /** Removes the files (the model is done with them). */
  release(): void {
    this.#store?.release();
    this.#allocated = false;
  }

  get #chunkCount(): number {
    return this.#offsets.length - 1;
  }

  get #other(): 0 | 1 {
    return this.#current === 0 ? 1 : 0;
  }

  /** Entry `index`'s buffer `name` in the current slot, as a view of the first resident buffer (idle). */
  #residentEntry(index: number, name: string): Float32Array {
    this.#expect('idle', 'checkpoint read');
    const place = this.#places[index]!;
    if (!this.#allocated) {
      // Never stepped nor loaded: the state is zeros.
      this.#cachedChunk = -1;
      return this.#chunkView(place.chunk, 0).fill(0).subarray(0, place.numel);
    }
    if (this.#cachedChunk !== place.chunk) {
      this.#cachedChunk = -1;
      this.#store!.drain();
      this.#readChunk(this.#current, place.chunk);
      this.#cachedChunk = place.chunk;
    }
    this.#active = 0;
    return this.#buffersOf(index).get(name)!;
  }

  #tryAllocate(): unknown {
    if (this.#allocated) return undefined;
    try {
      this.#store!.allocate();
      this.#allocated = true;
      this.#current = 0;
      return undefined;
    } catch (error) {
      return error;
    }
  }

  #readChunk(slot: 0 | 1, chunk: number): void {
    this.#active = 0;
    this.#store!.read(slot, chunk, this.#chunkView(chunk, 0));
  }

  #chunkView(chunk: number, buffer: 0 | 1 = this.#active): Float32Array {
    return this.#resident[buffer].subarray(0, this.#offsets[chunk + 1]! - this.#offsets[chunk]!);
  }

  #buffersOf(index: number): Map<string, Float32Array> {
    const { start, numel, names } = this.#places[index]!;
    const buffers = new Map<string, Float32Array>();
    names.forEach((name, position) => {
      const first = start + position * numel;
      buffers.set(name, this.#resident[this.#active].subarray(first, first + numel));
    });
    return buffers;
  }

  /** Every rank learns whether any rank failed; each then throws (see [Note: collective failure] in @fsdp-ts/checkpoint). */
  #agree(local: unknown, phase: string): void {
    try {
      throwIfAnyRankFailed(this.group, local, phase);
    } catch (error) {
      if (error instanceof CheckpointError && error.reason === 'peer-failed') {
        throw new FsdpError(error.message, {
          code: 'offload-failed',
          rank: this.group.rank,
          ...(error.file === undefined ? {} : { file: error.file }),
          cause: error,
        });
      }
      throw error;
    }
  }

  #expect(state: 'idle' | 'stepping', method: string): void {
    if (this.#state !== state) {
      throw new FsdpError(`Offloaded optimizer state: ${method} while ${this.#state} (expected ${state}).`, {
        code: 'wrong-state',
        expected: state,
        actual: this.#state,
        fix:
          this.#state === 'detached'
            ? 'attach the optimizer with model.offloadOptimizerState(optimizer).'
            : 'this is a bug in the offload: report it.',
      });
    }
  }
}

function sharedFloat32Array(length: number): Float32Array {
  return new Float32Array(new SharedArrayBuffer(Math.max(1, length) * 4), 0, length);
}
