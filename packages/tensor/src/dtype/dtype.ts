import { TensorError } from '../errors';

/**
 * Storage formats. `bfloat16` and `float16` are storage formats only: they live in Uint16Array
 * words and are converted to float32 for compute (tfjs has no 16-bit float kernels on cpu/wasm).
 */
export type DType = 'float32' | 'bfloat16' | 'float16' | 'int32' | 'uint8';

/** The typed arrays a Storage holds its elements in. */
export type TypedArray = Float32Array | Uint16Array | Int32Array | Uint8Array;

/** Every dtype's name. */
export const dtypes: readonly DType[] = ['float32', 'bfloat16', 'float16', 'int32', 'uint8'];

const itemSizes: Record<DType, number> = { float32: 4, bfloat16: 2, float16: 2, int32: 4, uint8: 1 };

/** Bytes per element. */
export function itemSize(dtype: DType): number {
  return itemSizes[dtype];
}

/** True for the dtypes whose words hold floating-point values. */
export function isFloatingPoint(dtype: DType): boolean {
  return dtype === 'float32' || dtype === 'bfloat16' || dtype === 'float16';
}

/** True when the value names a dtype. */
export function isDType(value: unknown): value is DType {
  return typeof value === 'string' && (dtypes as readonly string[]).includes(value);
}

/** Returns the value as a DType, or throws a TensorError naming the dtypes. */
export function checkDType(value: unknown): DType {
  if (!isDType(value)) {
    throw new TensorError(`Unknown dtype ${JSON.stringify(value)}.`, {
      code: 'invalid-argument',
      expected: dtypes,
      actual: value,
      fix: `use one of ${dtypes.join(', ')}.`,
    });
  }
  return value;
}

/** A typed array of the dtype's storage word over `buffer`. */
export function typedArrayFor(
  dtype: DType,
  buffer: ArrayBufferLike,
  byteOffset: number,
  numel: number,
): TypedArray {
  switch (dtype) {
    case 'float32':
      return new Float32Array(buffer, byteOffset, numel);
    case 'bfloat16':
    case 'float16':
      return new Uint16Array(buffer, byteOffset, numel);
    case 'int32':
      return new Int32Array(buffer, byteOffset, numel);
    case 'uint8':
      return new Uint8Array(buffer, byteOffset, numel);
  }
}
