import { type DType, type Parameter, Storage, TensorView } from '@fsdp-ts/tensor';
import { FlatParamError } from './errors';
import { assert } from './internal/assert';
import { collectParameters } from './internal/collect-parameters';
import { flattenIntoShard } from './internal/flatten';
import { notInUnit, unknownIndex, unshardedBufferFreed, wrongState } from './internal/handle-errors';
import { buildViewSet, type ViewSet } from './internal/view-set';
import {
  checkRank,
  computeFlatParamLayout,
  type FlatParamLayout,
  parameterIndex,
  type ShardIntersection,
  shardIntersections,
} from './layout';
import type { FlatParamMetadata } from './metadata';

/** Where every Parameter of the unit points: its 1-D local part, or its full shape. */
export type FlatParamState = 'sharded' | 'unsharded';

/** Options of a FlatParamHandle: rank, world size, alignment, dtype. */
export interface FlatParamHandleOptions {
  /** This process's rank in [0, worldSize). */
  readonly rank: number;
  readonly worldSize: number;
  /** Elements; each non-empty parameter starts at a multiple of it. Default 1. */
  readonly alignment?: number;
  /** The unit dtype; default the first parameter's. Every parameter must have it. */
  readonly dtype?: DType;
  /** dtype of the gradient buffers; default the unit dtype. */
  readonly gradDType?: DType;
  /**
   * Largest unsharded flat buffer, in elements. Default MAX_FLAT_NUMEL, what one typed array can
   * hold; a smaller cap rejects units above it the same way (see [Note: flat buffer limit]).
   */
  readonly maxNumel?: number;
}

/**
 * [Note: flat buffer limit]
 * A unit's unsharded buffer is one typed array, and V8 caps a typed array at 2^32 elements. A
 * unit larger than that is rejected at create() with the unit's parameters named, rather than
 * split: splitting would give a unit several all-gathers, which is what wrapping smaller units
 * does already, and no real layer comes near 2^32 elements (a GPT-3 175B block has 1.8·10^9).
 */
export const MAX_FLAT_NUMEL = 2 ** 32;

/**
 * One unit's parameters flattened into one padded buffer, sharded over `worldSize` ranks, with
 * every original Parameter kept alive as a view. Never communicates: the caller fills
 * `unshardedBuffer()` (all-gather of `shardedBuffer()`) and `shardedGradBuffer()`
 * (reduce-scatter of `unshardedGradBuffer()`).
 *
 * [Note: gradient views]
 * Frozen parameters' `grad` is always null. For a trainable parameter:
 *  - unsharded: the full-shape view of the unsharded gradient buffer while that buffer is
 *    allocated (`unshardedGradBuffer()` allocates it: autograd writes there), else null;
 *  - sharded: the 1-D view of its part of the sharded gradient buffer while that buffer holds a
 *    gradient for it (`setGradientsPresent(true)` after a reduce-scatter; also true for a
 *    parameter that brought a gradient into `create`), else null. So before the first backward
 *    `grad` is null, and no optimizer steps a frozen parameter or one without a gradient.
 * Setting a sharded `grad` to null (zeroGrad with setToNone) is noticed at the next unshard.
 */
export class FlatParamHandle {
  readonly layout: FlatParamLayout;
  readonly rank: number;
  readonly worldSize: number;
  /** Distinct Parameters in layout order (a tied Parameter appears once). */
  readonly parameters: readonly Parameter[];
  /** This rank's intersection with each parameter, in layout order. */
  readonly intersections: readonly ShardIntersection[];
  /** The local shard, [shardNumel] elements, SharedArrayBuffer-backed; freed only by `replicate()`. */
  readonly #shardedStorage: Storage;
  /** [paddedNumel] = worldSize × shard, rank-major; allocated on unshard, freed on reshard. */
  readonly #unshardedStorage: Storage;
  /** [shardNumel] of gradDType; freed only by `replicate()`. */
  readonly #shardedGradStorage: Storage;
  /** [paddedNumel] of gradDType, allocated by unshardedGradBuffer(), freed by freeUnshardedGrad(). */
  readonly #unshardedGradStorage: Storage;
  #replicated = false;
  private currentState: FlatParamState = 'sharded';
  private readonly views: ViewSet;
  private readonly gradientPresent: boolean[];
  private readonly named: readonly (readonly [string, Parameter])[];

  private constructor(
    layout: FlatParamLayout,
    rank: number,
    parameters: Parameter[],
    named: readonly (readonly [string, Parameter])[],
    gradDType: DType,
  ) {
    this.layout = layout;
    this.rank = rank;
    this.worldSize = layout.worldSize;
    this.parameters = parameters;
    this.named = named;
    this.intersections = shardIntersections(layout, rank);
    assert(
      parameters.length === layout.parameters.length &&
        layout.shardNumel * this.worldSize === layout.paddedNumel,
      'layout does not match the collected parameters',
      { parameters: parameters.length, layout: layout.parameters.length, shardNumel: layout.shardNumel },
    );
    const shared = { shared: true };
    this.#shardedStorage = Storage.allocate(layout.dtype, layout.shardNumel, shared);
    // Freed and re-allocated for every use of the unit: pooled (see [Note: storage pool]).
    const pooled = { shared: true, pooled: true };
    this.#unshardedStorage = Storage.unallocated(layout.dtype, layout.paddedNumel, pooled);
    this.#shardedGradStorage = Storage.allocate(gradDType, layout.shardNumel, shared);
    this.#unshardedGradStorage = Storage.unallocated(gradDType, layout.paddedNumel, pooled);
    this.views = buildViewSet(layout, parameters, this.intersections, {
      sharded: this.#shardedStorage,
      unsharded: this.#unshardedStorage,
      shardedGrad: this.#shardedGradStorage,
      unshardedGrad: this.#unshardedGradStorage,
    });
    this.gradientPresent = flattenIntoShard(layout, parameters, this.intersections, this.views);
    this.pointAtShardedViews();
  }

  /**
   * Flattens `named` ([dotted name, Parameter] pairs, registration order) for `rank` of
   * `worldSize`: copies this rank's part of every value into the sharded flat parameter and
   * switches every Parameter to its sharded view (state 'sharded').
   */
  static create(
    named: readonly (readonly [string, Parameter])[],
    options: FlatParamHandleOptions,
  ): FlatParamHandle {
    const collected = collectParameters(named, options.dtype);
    const layout = computeFlatParamLayout(collected.specs, {
      dtype: collected.dtype,
      worldSize: options.worldSize,
      ...(options.alignment === undefined ? {} : { alignment: options.alignment }),
    });
    checkRank(options.rank, layout.worldSize);
    checkFlatSize(layout.paddedNumel, options.maxNumel ?? MAX_FLAT_NUMEL, named);
    const pairs = named.map(([name, parameter]) => [name, parameter] as const);
    return new FlatParamHandle(
      layout,
      options.rank,
      collected.parameters,
      pairs,
      options.gradDType ?? layout.dtype,
    );
  }

  /** 'sharded' or 'unsharded'; changed only by useUnshardedViews() and useShardedViews(). */
  get state(): FlatParamState {
    return this.currentState;
  }

  /** Every [name, Parameter] pair as given to create (a tied Parameter under each of its names). */
  namedParameters(): readonly (readonly [string, Parameter])[] {
    return this.named;
  }

  /** The Parameter registered under `name` (any of a tied parameter's names). */
  parameter(name: string): Parameter {
    return this.parameters[parameterIndex(this.layout, name)]!;
  }

  /** Layout index of a parameter, by name or by object. */
  indexOf(parameter: string | Parameter): number {
    if (typeof parameter === 'string') return parameterIndex(this.layout, parameter);
    const index = this.parameters.indexOf(parameter);
    if (index < 0) throw notInUnit(parameter);
    return index;
  }

  /** The local shard, 1-D [shardNumel]: the all-gather input, the optimizer's memory. */
  shardedBuffer(): TensorView {
    return flatView(this.#shardedStorage);
  }

  /**
   * The unsharded flat parameter, 1-D [paddedNumel] (allocated, zero-filled, if it was freed): the
   * all-gather output. `{ zeroed: false }` leaves newly allocated memory unzeroed (it may hold an
   * earlier unit's values): for a caller that overwrites every element before anything reads it,
   * as an all-gather does (see [Note: zeroing shared memory] in @fsdp-ts/tensor).
   */
  unshardedBuffer(options: { zeroed?: boolean } = {}): TensorView {
    this.#unshardedStorage.allocate(options);
    return flatView(this.#unshardedStorage);
  }

  /** The sharded gradient, 1-D [shardNumel]: the reduce-scatter output. */
  shardedGradBuffer(): TensorView {
    return flatView(this.#shardedGradStorage);
  }

  /**
   * The unsharded gradient, 1-D [paddedNumel] (allocated, zero-filled, if it was freed): what
   * autograd fills through each trainable Parameter's full-shape `grad` and a reduce-scatter
   * reads. While unsharded, allocating it points every trainable `grad` at it. `{ zeroed: false }`
   * leaves newly allocated memory unzeroed: for a caller that writes or zeroes every element
   * before anything reads it.
   */
  unshardedGradBuffer(options: { zeroed?: boolean } = {}): TensorView {
    if (!this.#unshardedGradStorage.isAllocated) {
      this.#unshardedGradStorage.allocate(options);
      if (this.currentState === 'unsharded') this.pointGradsAtUnsharded();
    }
    return flatView(this.#unshardedGradStorage);
  }

  /** Precomputed views of parameter `index` (layout order); grad views are null for frozen ones. */
  unshardedView(index: number): TensorView {
    return this.views.unshardedData[this.checkIndex(index)]!;
  }

  /** This rank's shard of parameter `index` (layout order), as a view of the sharded flat parameter. */
  shardedView(index: number): TensorView {
    return this.views.shardedData[this.checkIndex(index)]!;
  }

  /** The view of parameter `index`'s gradient in the unsharded flat gradient; null for a frozen parameter. */
  unshardedGradView(index: number): TensorView | null {
    return this.views.unshardedGrad[this.checkIndex(index)]!;
  }

  /** Transition 'sharded' → 'unsharded': every Parameter's data becomes its full-shape view. */
  useUnshardedViews(): void {
    this.expectState('sharded', 'useUnshardedViews()');
    if (!this.#unshardedStorage.isAllocated) throw unshardedBufferFreed();
    const { parameters, views, gradientPresent } = this;
    const withGrad = this.#unshardedGradStorage.isAllocated;
    for (let index = 0; index < parameters.length; index++) {
      const parameter = parameters[index]!;
      const shardedGrad = views.shardedGrad[index]!;
      // Notice zeroGrad(setToNone) (or any re-pointing) done by the user while sharded.
      if (gradientPresent[index] && parameter.grad !== shardedGrad) gradientPresent[index] = false;
      parameter.data = views.unshardedData[index]!;
      parameter.grad = withGrad ? views.unshardedGrad[index]! : null;
    }
    this.currentState = 'unsharded';
  }

  /** Transition 'unsharded' → 'sharded': every Parameter's data becomes its 1-D local part. */
  useShardedViews(): void {
    this.expectState('unsharded', 'useShardedViews()');
    this.pointAtShardedViews();
    this.currentState = 'sharded';
  }

  /**
   * Copies this rank's part of the unsharded buffer back into the shard, after the full
   * parameters were edited in place (e.g. loading weights while gathered). State 'unsharded'.
   */
  writeback(): void {
    this.expectState('unsharded', 'writeback()');
    const start = this.rank * this.layout.shardNumel;
    const source = this.#unshardedStorage.array().subarray(start, start + this.layout.shardNumel);
    this.#shardedStorage.array().set(source);
  }

  /** Releases the unsharded buffer's memory (its Storage object and views stay). State 'sharded'. */
  freeUnsharded(): void {
    this.expectState('sharded', 'freeUnsharded()');
    this.#unshardedStorage.free();
  }

  /**
   * Releases the unsharded buffer's memory while the Parameters keep their full-shape views: for
   * a caller whose compute holds its own copy of the gathered values (tfjs's wasm backend copies
   * them into its heap). Reading a Parameter's data then throws StorageFreedError until the next
   * all-gather allocates the buffer again; `useShardedViews()` and `freeUnsharded()` work as
   * usual. State 'unsharded'.
   */
  freeUnshardedValues(): void {
    this.expectState('unsharded', 'freeUnshardedValues()');
    this.#unshardedStorage.free();
  }

  /** Releases the unsharded gradient's memory; while unsharded, trainable grads become null. */
  freeUnshardedGrad(): void {
    this.#unshardedGradStorage.free();
    if (this.currentState === 'unsharded') for (const parameter of this.parameters) parameter.grad = null;
  }

  /**
   * Declares whether the sharded gradient buffer holds a gradient for the trainable parameters
   * (true after the caller reduce-scattered into it; false to drop gradients). While sharded,
   * grads are re-pointed at once.
   */
  setGradientsPresent(present: boolean): void {
    this.layout.parameters.forEach((entry, index) => {
      this.gradientPresent[index] = present && !entry.frozen;
    });
    if (this.currentState === 'sharded') this.pointAtShardedViews();
  }

  /** Whether the unsharded flat parameter's memory is allocated (gathered, or being gathered into). */
  get unshardedAllocated(): boolean {
    return this.#unshardedStorage.isAllocated;
  }

  /**
   * Whether the unsharded gradient's memory is allocated: autograd wrote gradients that are not
   * reduced into the shard yet (or, replicated, the live gradient).
   */
  get hasUnshardedGrad(): boolean {
    return this.#unshardedGradStorage.isAllocated;
  }

  /** Bytes of memory the handle's four buffers hold now (freed ones count 0). */
  get allocatedBytes(): number {
    const storages = [
      this.#shardedStorage,
      this.#unshardedStorage,
      this.#shardedGradStorage,
      this.#unshardedGradStorage,
    ];
    return storages.reduce((sum, storage) => sum + (storage.isAllocated ? storage.byteLength : 0), 0);
  }

  /** `replicate()` was called: the unsharded buffers are the only copy. */
  get isReplicated(): boolean {
    return this.#replicated;
  }

  /**
   * This rank's memory of the flat parameter in its layout: the shard, or for a replicated
   * handle the unsharded buffer (the whole parameter).
   */
  localBuffer(): TensorView {
    return this.#replicated ? this.unshardedBuffer() : this.shardedBuffer();
  }

  /**
   * For a world-size-1 layout whose ranks all hold whole parameters (plain data parallel): makes
   * the unsharded buffers the only copy. Copies the shard into the unsharded buffer, points every
   * Parameter at its full view (→ 'unsharded', for good) and frees the sharded parameter and
   * gradient storages, which would only duplicate them. Gradients then live in the unsharded
   * gradient buffer.
   */
  replicate(): void {
    this.expectState('sharded', 'replicate()');
    assert(this.worldSize === 1, 'replicate() needs a world-size-1 layout', { worldSize: this.worldSize });
    this.unshardedBuffer().typedArray().set(this.shardedBuffer().typedArray());
    this.useUnshardedViews();
    this.#shardedStorage.free();
    this.#shardedGradStorage.free();
    this.#replicated = true;
  }

  /** Whether parameter `index` has a gradient in the sharded gradient buffer. */
  isGradientPresent(index: number): boolean {
    const checked = this.checkIndex(index);
    // While sharded, notice zeroGrad(setToNone) (or any re-pointing) done by the user since.
    if (
      this.currentState === 'sharded' &&
      this.gradientPresent[checked] &&
      this.parameters[checked]!.grad !== this.views.shardedGrad[checked]
    ) {
      this.gradientPresent[checked] = false;
    }
    return this.gradientPresent[checked]!;
  }

  /** The layout as plain JSON (a copy): names, shapes, dtype, offsets, world size, alignment, frozen and tied flags. */
  metadata(): FlatParamMetadata {
    return JSON.parse(JSON.stringify(this.layout)) as FlatParamMetadata;
  }

  private pointAtShardedViews(): void {
    const { parameters, views, gradientPresent } = this;
    for (let index = 0; index < parameters.length; index++) {
      const parameter = parameters[index]!;
      parameter.data = views.shardedData[index]!;
      parameter.grad = gradientPresent[index] ? views.shardedGrad[index]! : null;
    }
  }

  private pointGradsAtUnsharded(): void {
    const { parameters, views } = this;
    for (let index = 0; index < parameters.length; index++) {
      parameters[index]!.grad = views.unshardedGrad[index]!;
    }
  }

  private expectState(expected: FlatParamState, method: string): void {
    if (this.currentState !== expected) throw wrongState(method, expected, this.currentState);
  }

  private checkIndex(index: number): number {
    if (!Number.isInteger(index) || index < 0 || index >= this.parameters.length) {
      throw unknownIndex(index, this.parameters.length);
    }
    return index;
  }
}

function flatView(storage: Storage): TensorView {
  return new TensorView(storage, 0, [storage.numel]);
}

function checkFlatSize(
  paddedNumel: number,
  maxNumel: number,
  named: readonly (readonly [string, Parameter])[],
): void {
  if (paddedNumel <= maxNumel) return;
  const names = named.map(([name]) => name);
  const shown =
    names.length > 4 ? `${names.slice(0, 4).join(', ')} and ${names.length - 4} more` : names.join(', ');
  throw new FlatParamError(
    `A flat parameter of ${paddedNumel} elements (${shown}) is larger than the ${maxNumel} elements one flat buffer may hold.`,
    {
      code: 'too-large',
      expected: `at most ${maxNumel} elements`,
      actual: paddedNumel,
      parameters: names,
      fix: 'wrap smaller units (e.g. autoWrapPolicy with each layer class) so that no unit holds more; see [Note: flat buffer limit].',
    },
  );
}
