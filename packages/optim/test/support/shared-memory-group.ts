import type { NormReductionGroup, NormReductionWork } from '@fsdp-ts/optim';

/** The SharedArrayBuffers one group's ranks share. */
export interface SharedMemoryGroupBuffers {
  /** Int32Array [arrived, generation]: a sense-reversing barrier. */
  control: SharedArrayBuffer;
  /** Float32Array of size × capacity: one contribution slot per rank. */
  slots: SharedArrayBuffer;
  capacity: number;
}

export function createSharedMemoryGroupBuffers(size: number, capacity: number): SharedMemoryGroupBuffers {
  return {
    control: new SharedArrayBuffer(2 * Int32Array.BYTES_PER_ELEMENT),
    slots: new SharedArrayBuffer(size * capacity * Float32Array.BYTES_PER_ELEMENT),
    capacity,
  };
}

/**
 * A test-only process group for ranks that are worker threads of one process: `allReduce` really
 * waits for every rank (Atomics on a SharedArrayBuffer), then each rank sums all contributions in
 * rank order (so every rank gets bit-identical sums). Bounded: a rank that never arrives makes the
 * others throw after `timeoutMs`.
 */
export class SharedMemoryGroup implements NormReductionGroup {
  readonly rank: number;
  readonly size: number;
  private readonly control: Int32Array;
  private readonly slots: Float32Array;
  private readonly capacity: number;
  private readonly timeoutMs: number;

  constructor(rank: number, size: number, buffers: SharedMemoryGroupBuffers, timeoutMs = 20_000) {
    this.rank = rank;
    this.size = size;
    this.control = new Int32Array(buffers.control);
    this.slots = new Float32Array(buffers.slots);
    this.capacity = buffers.capacity;
    this.timeoutMs = timeoutMs;
  }

  allReduce(buffer: Float32Array, options: { op: 'sum' }): NormReductionWork {
    if (options.op !== 'sum' || buffer.length > this.capacity) {
      throw new Error(
        `SharedMemoryGroup: only sum of <= ${this.capacity} elements (got ${options.op}, ${buffer.length})`,
      );
    }
    this.slots.set(buffer, this.rank * this.capacity);
    return {
      wait: () => {
        this.barrier();
        for (let index = 0; index < buffer.length; index++) {
          let sum = 0;
          for (let rank = 0; rank < this.size; rank++) sum += this.slots[rank * this.capacity + index]!;
          buffer[index] = sum;
        }
        this.barrier(); // nobody overwrites a slot before every rank has read it
      },
    };
  }

  private barrier(): void {
    const generation = Atomics.load(this.control, 1);
    if (Atomics.add(this.control, 0, 1) === this.size - 1) {
      Atomics.store(this.control, 0, 0);
      Atomics.add(this.control, 1, 1);
      Atomics.notify(this.control, 1);
      return;
    }
    while (Atomics.load(this.control, 1) === generation) {
      if (Atomics.wait(this.control, 1, generation, this.timeoutMs) === 'timed-out') {
        throw new Error(
          `SharedMemoryGroup: rank ${this.rank} waited ${this.timeoutMs} ms for the other ranks`,
        );
      }
    }
  }
}
