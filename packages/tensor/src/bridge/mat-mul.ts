import * as tf from '@tensorflow/tfjs-core';
import { nativeMatMul } from './native/native-mat-mul';

/**
 * [Note: backward-friendly matMul]
 * On wasm (tfjs 4.22) matMul with transposeA/transposeB, and batched matMul, run 10-30x slower
 * than a plain 2-D matMul (measured here). The stock gradient of BatchMatMul uses exactly those
 * paths: dA = dy · Bᵀ via matMul(dy, b, false, true). This gradient materialises the transposes
 * explicitly and, for rank-2 operands, only ever calls plain 2-D matMuls. `registerMatMulGradient`
 * replaces the stock one, so every tf.matMul in the process benefits; `matMul` below also folds
 * leading dims of `a` into rows so [B, T, D] x [D, E] stays one 2-D matMul.
 */

function transposeLastTwo(tensor: tf.Tensor): tf.Tensor {
  const rank = tensor.rank;
  if (rank < 2) return tensor;
  const order = tensor.shape.map((_, dim) => dim);
  order[rank - 2] = rank - 1;
  order[rank - 1] = rank - 2;
  return tf.transpose(tensor, order);
}

/**
 * a · b with optional transposes: by flags when the BLAS kernel runs (they cost nothing there),
 * else done explicitly (copies), since the backend's flagged paths are the slow ones.
 */
function product(a: tf.Tensor, b: tf.Tensor, transposeA: boolean, transposeB: boolean): tf.Tensor {
  if (nativeMatMul.isActive(tf.getBackend())) return tf.matMul(a, b, transposeA, transposeB);
  return tf.matMul(transposeA ? transposeLastTwo(a) : a, transposeB ? transposeLastTwo(b) : b);
}

/** Sums a broadcast gradient back down to `shape` (batch dims of a batched matMul). */
function reduceTo(gradient: tf.Tensor, shape: readonly number[]): tf.Tensor {
  if (gradient.rank === shape.length && gradient.shape.every((size, dim) => size === shape[dim]))
    return gradient;
  const extra = gradient.rank - shape.length;
  const axes: number[] = [];
  for (let dim = 0; dim < gradient.rank; dim++) {
    if (dim < extra || (shape[dim - extra] === 1 && gradient.shape[dim] !== 1)) axes.push(dim);
  }
  return tf.reshape(tf.sum(gradient, axes), shape as number[]);
}

const batchMatMulGradient: tf.GradConfig = {
  kernelName: 'BatchMatMul',
  inputsToSave: ['a', 'b'],
  gradFunc: (dy: tf.Tensor | tf.Tensor[], saved: tf.Tensor[], attrs: tf.NamedAttrMap) => {
    const gradient = dy as tf.Tensor;
    const [a, b] = saved as [tf.Tensor, tf.Tensor];
    const transposeA = attrs.transposeA === true;
    const transposeB = attrs.transposeB === true;
    const gradientA = () => {
      // C = op(A)·op(B). dA follows from dC by the usual four cases, with explicit transposes.
      if (!transposeA && !transposeB) return reduceTo(product(gradient, b, false, true), a.shape);
      if (!transposeA && transposeB) return reduceTo(product(gradient, b, false, false), a.shape);
      if (transposeA && !transposeB) return reduceTo(product(b, gradient, false, true), a.shape);
      return reduceTo(product(b, gradient, true, true), a.shape);
    };
    const gradientB = () => {
      if (!transposeA && !transposeB) return reduceTo(product(a, gradient, true, false), b.shape);
      if (!transposeA && transposeB) return reduceTo(product(gradient, a, true, false), b.shape);
      if (transposeA && !transposeB) return reduceTo(product(a, gradient, false, false), b.shape);
      return reduceTo(product(gradient, a, true, true), b.shape);
    };
    return { a: gradientA, b: gradientB };
  },
};

/** Replaces tfjs's BatchMatMul gradient with the transpose-free one (see the note above). */
export function registerMatMulGradient(): void {
  const warn = console.warn;
  console.warn = () => {}; // tfjs warns when a gradient is overridden; that is the intent here
  try {
    tf.registerGradient(batchMatMulGradient);
  } finally {
    console.warn = warn;
  }
}

/**
 * a · b for `a` of shape [..., K] and `b` of shape [K, N]: folds a's leading dims into rows so the
 * work is one plain 2-D matMul (and its gradient two more), then restores the leading dims.
 */
export function matMul(a: tf.Tensor, b: tf.Tensor): tf.Tensor {
  if (a.rank <= 2 || b.rank !== 2) return tf.matMul(a, b);
  const rows = a.shape.slice(0, -1);
  const inner = a.shape[a.rank - 1]!;
  const flat = tf.reshape(a, [-1, inner]);
  return tf.reshape(tf.matMul(flat, b), [...rows, b.shape[1]!]);
}
