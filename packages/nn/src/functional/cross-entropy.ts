import * as tf from '@tensorflow/tfjs-core';
import { NnError } from '../errors';
import { arrayKernelsRun } from '../internal/array-kernel';
import { crossEntropyKernel } from '../internal/cross-entropy-kernel';

/**
 * Mean softmax cross-entropy over tokens: logits [N, V] or [B, T, V], targets int32 [N] or [B, T]
 * (class ids in [0, V)). Numerically stable: log-softmax as x - max - log(sum(exp(x - max))).
 * The gradient is written out: (softmax(logits) - oneHot(targets)) / N.
 */
export function crossEntropy(logits: tf.Tensor, targets: tf.Tensor): tf.Scalar {
  const classes = logits.shape[logits.rank - 1]!;
  const rows = logits.size / classes;
  if (logits.rank < 2 || targets.size !== rows || targets.dtype !== 'int32') {
    throw new NnError(
      `crossEntropy: logits [${logits.shape.join(', ')}] with ${targets.dtype} targets [${targets.shape.join(', ')}].`,
      {
        code: 'shape-mismatch',
        expected: 'logits [..., V] and int32 targets with one id per row of logits',
        actual: { logits: logits.shape, targets: targets.shape, dtype: targets.dtype },
        fix: 'pass targets of the logits shape without the last dim, as int32 (tf.tensor(ids, shape, "int32")).',
      },
    );
  }
  if (arrayKernelsRun() && logits.dtype === 'float32') {
    // One kernel forward and one backward (see [Note: array kernels]).
    const flatLogits = logits.rank === 2 ? logits : tf.reshape(logits, [rows, classes]);
    const flatTargets = targets.rank === 1 ? targets : tf.reshape(targets, [rows]);
    return crossEntropyKernel(flatLogits, flatTargets);
  }
  return crossEntropyWithOps(logits, targets);
}

/** Cross-entropy as tfjs ops: other backends, and the kernel's test oracle (inputs checked by crossEntropy). */
export function crossEntropyWithOps(logits: tf.Tensor, targets: tf.Tensor): tf.Scalar {
  const classes = logits.shape[logits.rank - 1]!;
  const rows = logits.size / classes;
  const oneHot = tf.oneHot(tf.reshape(targets, [rows]), classes);
  const compute = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
    const input = tf.reshape(args[0] as tf.Tensor, [rows, classes]);
    const save = args[1] as tf.GradSaveFunc;
    const logProbabilities = tf.logSoftmax(input);
    const loss = tf.div(tf.neg(tf.sum(tf.mul(logProbabilities, oneHot))), rows) as tf.Scalar;
    save([logProbabilities, oneHot]);
    return {
      value: loss,
      gradFunc: (dy: tf.Tensor | tf.Tensor[], saved: tf.Tensor[]) => {
        const [savedLogProbabilities, savedOneHot] = saved as [tf.Tensor, tf.Tensor];
        const scale = tf.div(dy as tf.Tensor, rows);
        const difference = tf.sub(tf.exp(savedLogProbabilities), savedOneHot);
        return [tf.reshape(tf.mul(difference, scale), logits.shape)];
      },
    };
  });
  return compute(logits) as tf.Scalar;
}
