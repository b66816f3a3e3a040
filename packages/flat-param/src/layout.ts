import { type DType, isDType } from '@fsdp-ts/tensor';
import { FlatParamError } from './errors';

/** Version of the JSON layout format written by `metadata()`; bumped on any incompatible change. */
export const FLAT_PARAM_LAYOUT_VERSION = 1;

/** One distinct parameter of a unit, as placed in the flat buffer. Plain JSON data. */
export interface LayoutParameter {
  /** Every name it was registered under, in registration order; more than one means tied. */
  readonly names: readonly string[];
  /** The original shape ([] for a scalar). */
  readonly shape: readonly number[];
  readonly numel: number;
  /** Elements (not bytes) from the start of the flat buffer; a multiple of `alignment` unless numel is 0. */
  readonly offset: number;
  /** requiresGrad was false when the unit was flattened: no gradient is ever exposed for it. */
  readonly frozen: boolean;
}

/**
 * The flat-parameter layout of one unit: pure, JSON-serialisable data.
 *
 * [Note: flat layout]
 * Distinct parameters are concatenated in registration order. Each one starts at the next multiple
 * of `alignment` elements (zero-size parameters take no room and are not aligned); the gaps are
 * zero padding. `totalNumel` is where the last parameter ends; the buffer is padded with zeros to
 * `paddedNumel`, the next multiple of `worldSize`, and split into `worldSize` equal shards of
 * `shardNumel` elements: rank r owns flat elements [r * shardNumel, (r + 1) * shardNumel).
 * Offsets do not depend on the world size, only the end padding does (see `withWorldSize`), which
 * is what makes resharding a checkpoint a pure index computation.
 */
export interface FlatParamLayout {
  readonly version: typeof FLAT_PARAM_LAYOUT_VERSION;
  readonly dtype: DType;
  readonly worldSize: number;
  /** Elements, not bytes. */
  readonly alignment: number;
  readonly parameters: readonly LayoutParameter[];
  readonly totalNumel: number;
  readonly paddedNumel: number;
  readonly shardNumel: number;
}

/**
 * The part of one parameter held by one rank's shard: flat elements
 * [offsetInShard, offsetInShard + length) of the shard are elements
 * [offsetInParam, offsetInParam + length) of the parameter, in row-major order.
 * An empty intersection is always `{ offsetInShard: 0, offsetInParam: 0, length: 0 }`.
 */
export interface ShardIntersection {
  readonly offsetInShard: number;
  readonly offsetInParam: number;
  readonly length: number;
}

/** What the layout needs to know about one distinct parameter. */
export interface LayoutParameterSpec {
  readonly names: readonly string[];
  readonly shape: readonly number[];
  readonly frozen?: boolean;
}

/** Options of computeFlatParamLayout: dtype, world size, alignment. */
export interface LayoutOptions {
  readonly dtype: DType;
  readonly worldSize: number;
  /** Elements; each non-empty parameter starts at a multiple of it. Default 1 (no gaps). */
  readonly alignment?: number;
}

const EMPTY: ShardIntersection = Object.freeze({ offsetInShard: 0, offsetInParam: 0, length: 0 });

/**
 * Lays out a unit's parameters in one flat buffer padded to a multiple of the world size
 * ([Note: flat layout]).
 */
export function computeFlatParamLayout(
  specs: readonly LayoutParameterSpec[],
  options: LayoutOptions,
): FlatParamLayout {
  const worldSize = checkPositiveInteger(options.worldSize, 'worldSize');
  const alignment = checkPositiveInteger(options.alignment ?? 1, 'alignment');
  if (!isDType(options.dtype)) {
    throw new FlatParamError(`Unknown dtype ${JSON.stringify(options.dtype)}.`, {
      code: 'invalid-argument',
      expected: 'a @fsdp-ts/tensor dtype',
      actual: options.dtype,
      fix: 'pass the dtype of the unit parameters.',
    });
  }
  const seen = new Set<string>();
  const parameters: LayoutParameter[] = [];
  let cursor = 0;
  for (const spec of specs) {
    checkNames(spec.names, seen);
    const shape = checkShape(spec.shape, spec.names);
    const numel = shape.reduce((product, size) => product * size, 1);
    const offset = numel === 0 ? cursor : Math.ceil(cursor / alignment) * alignment;
    cursor = offset + numel;
    parameters.push({ names: [...spec.names], shape, numel, offset, frozen: spec.frozen ?? false });
  }
  return paddedLayout(options.dtype, alignment, parameters, cursor, worldSize);
}

/** The same layout (same offsets) padded and sharded for another world size. */
export function withWorldSize(layout: FlatParamLayout, worldSize: number): FlatParamLayout {
  checkPositiveInteger(worldSize, 'worldSize');
  return paddedLayout(layout.dtype, layout.alignment, layout.parameters, layout.totalNumel, worldSize);
}

/** The intersection of parameter `index` with `rank`'s shard. O(1). */
export function shardIntersection(layout: FlatParamLayout, rank: number, index: number): ShardIntersection {
  const parameter = layout.parameters[index];
  if (parameter === undefined) throw unknownIndex(layout, index);
  checkRank(rank, layout.worldSize);
  const shardStart = rank * layout.shardNumel;
  const start = Math.max(parameter.offset, shardStart);
  const end = Math.min(parameter.offset + parameter.numel, shardStart + layout.shardNumel);
  if (end <= start) return EMPTY;
  return { offsetInShard: start - shardStart, offsetInParam: start - parameter.offset, length: end - start };
}

/** Every parameter's intersection with `rank`'s shard, in layout order. */
export function shardIntersections(layout: FlatParamLayout, rank: number): ShardIntersection[] {
  return layout.parameters.map((_, index) => shardIntersection(layout, rank, index));
}

/** Index in `layout.parameters` of the parameter registered under `name` (any of its tied names). */
export function parameterIndex(layout: FlatParamLayout, name: string): number {
  const index = layout.parameters.findIndex((parameter) => parameter.names.includes(name));
  if (index < 0) {
    throw new FlatParamError(`No parameter named ${JSON.stringify(name)} in this unit.`, {
      code: 'unknown-parameter',
      expected: `one of ${JSON.stringify(layout.parameters.flatMap((parameter) => parameter.names))}`,
      actual: name,
      parameters: [name],
      fix: 'use the dotted name the parameter was registered under when the unit was flattened.',
    });
  }
  return index;
}

function paddedLayout(
  dtype: DType,
  alignment: number,
  parameters: readonly LayoutParameter[],
  totalNumel: number,
  worldSize: number,
): FlatParamLayout {
  const shardNumel = Math.ceil(totalNumel / worldSize);
  return {
    version: FLAT_PARAM_LAYOUT_VERSION,
    dtype,
    worldSize,
    alignment,
    parameters,
    totalNumel,
    paddedNumel: shardNumel * worldSize,
    shardNumel,
  };
}

function checkNames(names: readonly string[], seen: Set<string>): void {
  if (names.length === 0 || names.some((name) => typeof name !== 'string' || name.length === 0)) {
    throw new FlatParamError(
      `Every parameter needs at least one non-empty name; got ${JSON.stringify(names)}.`,
      {
        code: 'invalid-argument',
        expected: 'non-empty names such as "layer.weight"',
        actual: names,
        fix: 'pass [name, Parameter] pairs with the dotted path of each parameter.',
      },
    );
  }
  for (const name of names) {
    if (seen.has(name)) {
      throw new FlatParamError(`The name ${JSON.stringify(name)} is used twice in one unit.`, {
        code: 'duplicate-name',
        expected: 'each name once (a tied parameter has several names, not a name several times)',
        actual: name,
        parameters: [name],
        fix: 'give every [name, Parameter] pair a distinct dotted path.',
      });
    }
    seen.add(name);
  }
}

function checkShape(shape: readonly number[], names: readonly string[]): number[] {
  if (!Array.isArray(shape) || shape.some((size) => !Number.isSafeInteger(size) || size < 0)) {
    throw new FlatParamError(
      `Parameter ${names.join(' / ')} has an invalid shape ${JSON.stringify(shape)}.`,
      {
        code: 'invalid-argument',
        expected: 'non-negative integer sizes',
        actual: shape,
        parameters: names,
        fix: 'pass the parameter shape, e.g. [5, 5].',
      },
    );
  }
  return [...shape];
}

function checkPositiveInteger(value: number, what: string): number {
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new FlatParamError(`${what} must be a positive integer; got ${value}.`, {
      code: 'invalid-argument',
      expected: 'an integer >= 1',
      actual: value,
      fix: `pass ${what} as a whole number, e.g. ${what === 'alignment' ? '16' : '2'}.`,
    });
  }
  return value;
}

export function checkRank(rank: number, worldSize: number): void {
  if (!Number.isSafeInteger(rank) || rank < 0 || rank >= worldSize) {
    throw new FlatParamError(`Rank ${rank} is outside a world of ${worldSize}.`, {
      code: 'invalid-argument',
      expected: `an integer in [0, ${worldSize})`,
      actual: rank,
      fix: 'pass this process rank from the process group.',
    });
  }
}

function unknownIndex(layout: FlatParamLayout, index: number): FlatParamError {
  return new FlatParamError(`No parameter at index ${index}: the unit has ${layout.parameters.length}.`, {
    code: 'unknown-parameter',
    expected: `an index in [0, ${layout.parameters.length})`,
    actual: index,
    fix: 'use parameterIndex(layout, name) to find a parameter by name.',
  });
}
