import { storagePool } from '@fsdp-ts/tensor';
import { garbageCollector } from './reclaim-unflattened';

/**
 * [Note: collecting under a memory cap]
 * Gathering a unit and freeing it again leaves its ArrayBuffers to V8's garbage collector, which
 * runs a major collection when the JavaScript heap needs one, not when the process nears a cap it
 * does not know about: at 350 M parameters, W=4, under a 2 GiB cgroup cap, about 0.1 GiB of freed
 * but uncollected buffers piled up per step, and the fourth step was OOM-killed at 1.98 GiB
 * (bench:scale, issue 21). So when a cap is known (`fsdp-run --memory-per-rank`, or a cgroup
 * limit), before each unit's forward, after each unit's backward and at the end of each backward
 * the resident set is compared
 * with PRESSURE_FRACTION of the cap, and a full collection is run when it is above it and has
 * grown by at least PRESSURE_GROWTH_BYTES since the last collection (so a rank whose live data
 * alone sits above the line does not collect after every unit). Without a cap this does nothing.
 * Above the line the storage pool's waiting buffers are dropped first ([Note: storage pool]): a
 * pool filled at an earlier, higher point of the step (the last unit kept gathered while the next
 * is prefetched) otherwise holds a gathered unit's worth of memory nobody uses at the step's
 * peak, as PyTorch's caching allocator empties its cache before it gives up on an allocation.
 * 1.3 B at W=4 (192 MiB units): one such buffer waited through the end of backward. The check
 * also runs before each unit's forward gather, where the next step allocates its first units
 * on top of everything the optimizer step touched (the tightest point of that run).
 * One check is one `process.memoryUsage.rss()` call; one collection of the small JavaScript heap
 * costs milliseconds.
 */
export const PRESSURE_FRACTION = 0.85;
export const PRESSURE_GROWTH_BYTES = 64 * 1024 ** 2;

export class MemoryPressureCollector {
  readonly #threshold: number | undefined;
  #residentAfterLastCollection = 0;
  #collections = 0;

  constructor(capBytes: number | undefined) {
    this.#threshold = capBytes === undefined ? undefined : PRESSURE_FRACTION * capBytes;
  }

  /** How many collections the pressure has caused so far. */
  get collections(): number {
    return this.#collections;
  }

  /** Collects when the resident set is above the line and has grown since the last collection. */
  check(): void {
    if (this.#threshold === undefined) return;
    const resident = process.memoryUsage.rss();
    if (resident < this.#threshold) return;
    if (resident - this.#residentAfterLastCollection < PRESSURE_GROWTH_BYTES) return;
    storagePool.clear();
    const collect = garbageCollector();
    if (collect === undefined) return;
    collect();
    this.#collections += 1;
    this.#residentAfterLastCollection = process.memoryUsage.rss();
  }
}
