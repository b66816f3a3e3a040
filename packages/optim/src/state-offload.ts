import type { Parameter } from '@fsdp-ts/tensor';

/**
 * One parameter's state as an offload keeps it: the parameter, its element count (`param.data`'s
 * when the offload was attached, the shard when sharded) and the names of its state buffers.
 */
export interface OffloadedStateEntry {
  readonly parameter: Parameter;
  readonly numel: number;
  readonly bufferNames: readonly string[];
}

/**
 * Where an optimizer's state lives when it does not live in the optimizer: host memory apart
 * from the model, or files (FSDP's `offload` option implements it; optimizers know nothing of
 * FSDP). Attached with `optimizer.offloadState(offload)`.
 *
 * [Note: offloaded optimizer state]
 * The state of the optimizer's parameters (position order, `entries`) is resident a chunk at a
 * time. A step is `beginStep` (collective: throws on every rank, before anything changes, when
 * the state cannot be read), then one or more passes of `forEachResident`, each visiting every
 * entry once in position order with its buffers (`numel` float32 elements each, views of the
 * resident chunk) — passes that change the state say so (`writes`), later passes of the same
 * step see what they wrote — then `endStep(failure)` (collective: every rank agrees, then what
 * the step wrote becomes the state, or every rank throws and the state stays what it was).
 * A pass whose chunk cannot be read stops visiting but returns, so every rank reaches the same
 * collectives; `endStep` reports it. Kernels see the same arrays, in the same calls, as without
 * offload: a chunk never splits an entry, so results are bitwise equal.
 */
export interface OptimizerStateOffload {
  /** Called once by `offloadState`, with every parameter of the optimizer in position order. */
  attach(entries: readonly OffloadedStateEntry[]): void;
  /** Begins a step (collective): throws on every rank, before anything changes, when the state cannot be read. */
  beginStep(): void;
  /** One pass: every entry once, in position order, with its buffers resident; `writes`: the pass changes them. */
  forEachResident(
    writes: boolean,
    visit: (index: number, buffers: ReadonlyMap<string, Float32Array>) => void,
  ): void;
  /** Ends a step (collective): what it wrote becomes the state, or every rank throws (`failure`: this rank's error, if any). */
  endStep(failure: unknown): void;
  /** A copy of one entry's buffer, as the current state holds it (state dicts). */
  read(index: number, name: string): Float32Array;
  /** Replaces entries' buffers in the current state (loading a state dict); all or nothing. */
  write(values: readonly { index: number; name: string; values: Float32Array }[]): void;
}
