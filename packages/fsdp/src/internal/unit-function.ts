import { type RandomStateful, withParameterTensors } from '@fsdp-ts/nn';
import { nestedGradients, type Parameter } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import { FsdpError } from '../errors';

/** What a recomputing unit needs from the runtime around its autograd boundary. */
export interface RecomputingUnitHooks {
  /** Before forward and before backward: gather the unit and return its parameter tensors. */
  gatherParameters(phase: 'forward' | 'backward'): Map<Parameter, tf.Tensor>;
  /** After forward / after backward: release the gathered parameters. */
  releaseParameters(phase: 'forward' | 'backward'): void;
  /** The trainable Parameters, in the order their gradients are reported. */
  trainable(): Parameter[];
  /** Backward produced these parameter gradients (same order as trainable()). */
  onParameterGradients(gradients: tf.Tensor[]): void;
  /** The unit's layers that draw random numbers ([Note: random-state protocol]): replayed by the recompute. */
  randomLayers(): readonly RandomStateful[];
}

/**
 * [Note: recomputing units]
 * A unit under activation checkpointing (the `activationCheckpointing` option, or a preset with
 * `recompute`; other units keep their activations, see [Note: released parameters]) is one
 * tfjs customGrad. Its forward runs with the gathered parameters
 * and keeps only its inputs; the parameters are released right after. Its gradient function
 * gathers the parameters again, re-runs the forward under the tape (nestedGradients: see
 * [Note: nested tape] in @fsdp-ts/tensor), hands the parameter gradients to the runtime (which
 * starts the reduce-scatter) and returns the input gradients to tfjs at once. Float inputs are
 * differentiable; other arguments (int tokens, options) pass through unchanged. The anchor input
 * makes tfjs run the gradient function even when no input depends on a trainable tensor.
 * The recompute replays the forward's random draws: every random layer's state is taken before
 * the forward, set again for the recompute, and put back afterwards, so dropout masks (and any
 * other layer's draws) match.
 */
export function runRecomputingUnit(
  forward: (...args: unknown[]) => unknown,
  args: unknown[],
  anchor: tf.Tensor,
  hooks: RecomputingUnitHooks,
  label: string,
): tf.Tensor {
  const floatPositions = args.flatMap((arg, position) =>
    arg instanceof tf.Tensor && arg.dtype === 'float32' ? [position] : [],
  );
  const rebuild = (inputs: readonly tf.Tensor[]) => {
    const rebuilt = [...args];
    floatPositions.forEach((position, index) => {
      rebuilt[position] = inputs[index];
    });
    return rebuilt;
  };
  const run = (tensors: Map<Parameter, tf.Tensor>, inputs: readonly tf.Tensor[]) => {
    const output = withParameterTensors(tensors, () => forward(...rebuild(inputs)));
    if (!(output instanceof tf.Tensor)) {
      throw new FsdpError(
        `${label} returned ${typeof output} from forward; a full-shard unit must return one tensor.`,
        {
          code: 'unsupported-model',
          expected: 'a tf.Tensor',
          actual: typeof output,
          fix: "wrap a module that returns one tensor, or use shardingStrategy 'shard-grad-op' for this model.",
        },
      );
    }
    return output;
  };
  const unit = tf.customGrad((...received: (tf.Tensor | tf.GradSaveFunc)[]) => {
    const save = received[received.length - 1] as tf.GradSaveFunc;
    const inputs = received.slice(0, floatPositions.length) as tf.Tensor[];
    save(inputs);
    const randomLayers = hooks.randomLayers();
    const forwardStates = randomLayers.map((layer) => layer.getRandomState());
    let value: tf.Tensor;
    try {
      value = run(hooks.gatherParameters('forward'), inputs);
    } finally {
      hooks.releaseParameters('forward');
    }
    return {
      value,
      gradFunc: (dy: tf.Tensor | tf.Tensor[], saved: tf.Tensor[]) => {
        const tensors = hooks.gatherParameters('backward');
        const currentStates = randomLayers.map((layer) => layer.getRandomState());
        randomLayers.forEach((layer, index) => {
          layer.setRandomState(forwardStates[index]);
        });
        try {
          const trainable = hooks.trainable();
          const differentiated = [...saved, ...trainable.map((parameter) => tensors.get(parameter)!)];
          const { value: recomputed, gradients } = nestedGradients(
            (...all: tf.Tensor[]) => {
              const substituted = new Map(tensors);
              trainable.forEach((parameter, index) => {
                substituted.set(parameter, all[saved.length + index]!);
              });
              return run(substituted, all.slice(0, saved.length));
            },
            differentiated,
            dy as tf.Tensor,
          );
          recomputed.dispose();
          const inputGradients = gradients.slice(0, saved.length);
          const parameterGradients = gradients.slice(saved.length);
          hooks.onParameterGradients(parameterGradients);
          // Free the parameter gradients now (they are in the flat buffer), except tensors tfjs
          // still holds: dy itself or an input gradient (x + p gives dx = dp = dy).
          const kept = new Set<tf.Tensor>([dy as tf.Tensor, ...inputGradients]);
          for (const gradient of parameterGradients) if (!kept.has(gradient)) gradient.dispose();
          return [...inputGradients, tf.zerosLike(anchor)];
        } finally {
          randomLayers.forEach((layer, index) => {
            layer.setRandomState(currentStates[index]);
          });
          hooks.releaseParameters('backward');
        }
      },
    };
  });
  return unit(...floatPositions.map((position) => args[position] as tf.Tensor), anchor);
}
