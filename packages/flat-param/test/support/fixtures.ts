// What this package's tests repeat: reference parameters, each rank's handle, and the
// collectives done in-process.
import { FlatParamHandle, type FlatParamHandleOptions } from '@fsdp-ts/flat-param';
import { Parameter } from '@fsdp-ts/tensor';
import fc from 'fast-check';

/** Element count of a shape (1 for a scalar). Written here so tests do not trust the code under test. */
export function numelOf(shape: readonly number[]): number {
  return shape.reduce((product, size) => product * size, 1);
}

/** Distinct, exactly representable float32 values: parameter p, element k → p * 1000 + k + 0.5. */
export function referenceValue(parameterIndex: number, element: number): number {
  return parameterIndex * 1000 + element + 0.5;
}

export interface ParameterSpec {
  readonly shape: number[];
  readonly frozen: boolean;
}

/** Fresh Parameters (one rank's copy of the model) with reference values and dotted names. */
export function makeNamedParameters(specs: readonly ParameterSpec[]): [string, Parameter][] {
  return specs.map((spec, index) => {
    const values = Array.from({ length: numelOf(spec.shape) }, (_, element) =>
      referenceValue(index, element),
    );
    const parameter = Parameter.fromArray(values, spec.shape, { requiresGrad: !spec.frozen });
    return [`block${Math.floor(index / 2)}.parameter${index}`, parameter];
  });
}

/** Shapes up to rank 3 with sizes 0-5: scalars ([]), zero-size and ordinary ones. */
export const shapeArbitrary = fc.array(fc.integer({ min: 0, max: 5 }), { minLength: 0, maxLength: 3 });

export const specsArbitrary = fc.array(fc.record({ shape: shapeArbitrary, frozen: fc.boolean() }), {
  minLength: 1,
  maxLength: 8,
});

export const worldSizeArbitrary = fc.integer({ min: 1, max: 8 });
export const alignmentArbitrary = fc.integer({ min: 1, max: 8 });

/**
 * One handle per rank of `copies.length` ranks, rank r's over `copies[r]` (each rank's own copy of
 * the same named parameters, as real ranks hold them).
 */
export function handlesPerRank(
  copies: readonly (readonly [string, Parameter][])[],
  options: Omit<FlatParamHandleOptions, 'rank' | 'worldSize'> = {},
): FlatParamHandle[] {
  return copies.map((pairs, rank) =>
    FlatParamHandle.create(pairs, { ...options, rank, worldSize: copies.length }),
  );
}

/** One handle per rank, each over its own copy of the same parameter values (as real ranks are). */
export function createRanks(
  specs: readonly ParameterSpec[],
  worldSize: number,
  alignment: number,
): { handles: FlatParamHandle[]; named: [string, Parameter][][] } {
  const named = Array.from({ length: worldSize }, () => makeNamedParameters(specs));
  const handles = handlesPerRank(named, { alignment });
  return { handles, named };
}

/**
 * The all-gather, done in-process: concatenates every rank's shard (rank-major) into each
 * handle's unsharded buffer.
 */
export function allGather(handles: readonly FlatParamHandle[]): void {
  for (const handle of handles) {
    const output = handle.unshardedBuffer().typedArray();
    handles.forEach((source, rank) => {
      output.set(source.shardedBuffer().typedArray(), rank * source.layout.shardNumel);
    });
  }
}

/** The reduce-scatter (sum) done in-process: every rank's unsharded gradient into each shard. */
export function reduceScatter(handles: readonly FlatParamHandle[]): void {
  for (const [rank, handle] of handles.entries()) {
    const output = handle.shardedGradBuffer().typedArray();
    const shardNumel = handle.layout.shardNumel;
    output.fill(0);
    for (const source of handles) {
      const input = source.unshardedGradBuffer().typedArray();
      for (let element = 0; element < shardNumel; element++) {
        output[element]! += input[rank * shardNumel + element]!;
      }
    }
  }
}
