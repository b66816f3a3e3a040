import { bfloat16ToFloat32, float32ToBfloat16 } from './bfloat16';
import { codecFor } from './codec';
import type { DType, TypedArray } from './dtype';
import { float16ToFloat32, float32ToFloat16 } from './float16';

/** Copies `source` (of `sourceDType`) into `target` (of `targetDType`), converting; equal lengths. */
export function convertContiguous(
  source: TypedArray,
  sourceDType: DType,
  target: TypedArray,
  targetDType: DType,
): void {
  if (sourceDType === targetDType) {
    target.set(source);
    return;
  }
  if (sourceDType === 'float32' && targetDType === 'bfloat16') {
    float32ToBfloat16(source as Float32Array, target as Uint16Array);
  } else if (sourceDType === 'bfloat16' && targetDType === 'float32') {
    bfloat16ToFloat32(source as Uint16Array, target as Float32Array);
  } else if (sourceDType === 'float32' && targetDType === 'float16') {
    float32ToFloat16(source as Float32Array, target as Uint16Array);
  } else if (sourceDType === 'float16' && targetDType === 'float32') {
    float16ToFloat32(source as Uint16Array, target as Float32Array);
  } else {
    const decode = codecFor(sourceDType).decode;
    const encode = codecFor(targetDType).encode;
    for (let index = 0; index < source.length; index++) target[index] = encode(decode(source[index]!));
  }
}
