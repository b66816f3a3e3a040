import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { FlatParamHandle } from '@fsdp-ts/flat-param';

/**
 * [Note: releasing the unflattened parameters]
 * Wrapping copies each Parameter's values into its unit's flat shard and re-points the Parameter
 * at a view of it; the Parameter's original storage is then garbage. PyTorch frees it at once
 * (reference counting); V8 frees an ArrayBuffer only when a garbage collection finds it, and a
 * training loop allocates too few JavaScript objects for V8 to run a major collection soon: at
 * 100 M parameters and W=4 every rank still held the 0.4 GB of original values after several
 * steps (bench:scale), which is what decides whether a model fits under a per-rank cap. So after
 * flattening more than RECLAIM_THRESHOLD_BYTES the constructor asks for one full collection.
 * `global.gc` is used when Node runs with --expose-gc; otherwise the flag is turned on for this
 * process (`v8.setFlagsFromString`) and the collector is taken from a fresh context, which is how
 * Node exposes it. One collection of the small JavaScript heap costs milliseconds; the backing
 * stores are then released by V8's sweeper.
 */
export const RECLAIM_THRESHOLD_BYTES = 64 * 1024 ** 2;

let collector: (() => void) | undefined;

/** A full collection, or undefined where this Node refuses to expose one. */
export function garbageCollector(): (() => void) | undefined {
  const exposed = (globalThis as { gc?: () => void }).gc;
  if (typeof exposed === 'function') return exposed;
  if (collector === undefined) {
    try {
      setFlagsFromString('--expose-gc');
      collector = runInNewContext('gc') as () => void;
    } catch {
      return undefined;
    }
  }
  return collector;
}

/** Runs one full garbage collection when `flattenedBytes` is large enough to matter. */
export function reclaimUnflattenedParameters(flattenedBytes: number): void {
  if (flattenedBytes < RECLAIM_THRESHOLD_BYTES) return;
  garbageCollector()?.();
}

/** The bytes flattening copied: every handle's float32 values. */
export function flattenedBytes(units: readonly { readonly handles: readonly FlatParamHandle[] }[]): number {
  let elements = 0;
  for (const unit of units) for (const handle of unit.handles) elements += handle.layout.totalNumel;
  return 4 * elements;
}
