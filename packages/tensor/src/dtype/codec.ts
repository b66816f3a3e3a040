import { bfloat16ToFloat32Scalar, float32ToBfloat16Scalar } from './bfloat16';
import type { DType } from './dtype';
import { float16ToFloat32Scalar, float32ToFloat16Scalar } from './float16';

/** How one storage word of a dtype maps to and from a JavaScript number. */
export interface ScalarCodec {
  decode(word: number): number;
  encode(value: number): number;
}

const identity: ScalarCodec = { decode: (word) => word, encode: (value) => value };
const int32: ScalarCodec = { decode: (word) => word, encode: (value) => Math.trunc(value) | 0 };
const uint8: ScalarCodec = { decode: (word) => word, encode: (value) => Math.trunc(value) & 0xff };

const codecs: Record<DType, ScalarCodec> = {
  float32: identity,
  bfloat16: { decode: bfloat16ToFloat32Scalar, encode: float32ToBfloat16Scalar },
  float16: { decode: float16ToFloat32Scalar, encode: float32ToFloat16Scalar },
  int32,
  uint8,
};

export function codecFor(dtype: DType): ScalarCodec {
  return codecs[dtype];
}
