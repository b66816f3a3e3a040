import type * as tf from '@tensorflow/tfjs-core';
import { causalAttentionReference } from './causal-attention-reference';

/** Causal attention from fused qkv [B, T, 3·D]; see causal-attention-reference.ts for the math. */
export function causalAttention(qkv: tf.Tensor, heads: number): tf.Tensor {
  return causalAttentionReference(qkv, heads);
}
