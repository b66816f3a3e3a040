import {
  Adam,
  type AdamOptions,
  AdamW,
  type BaseOptions,
  type Optimizer,
  SGD,
  type SGDOptions,
} from '@fsdp-ts/optim';
import type { Parameter } from '@fsdp-ts/tensor';
import { LayersError } from '../errors';

/** The optimizers a ShardedTrainer builds by name. */
export type OptimizerName = 'sgd' | 'adam' | 'adamw';

/** Builds the optimizer over the trainer's Parameters (one per trainable weight, named as the weight). */
export type OptimizerFactory = (parameters: Parameter[]) => Optimizer<BaseOptions>;

/** Hyperparameters of the optimizer named by OptimizerName. */
export type OptimizerOptions = Partial<SGDOptions> | Partial<AdamOptions>;

const optimizerNames: readonly OptimizerName[] = ['sgd', 'adam', 'adamw'];

export function resolveOptimizer(
  choice: unknown,
  options: OptimizerOptions,
  parameters: Parameter[],
): Optimizer<BaseOptions> {
  if (typeof choice === 'function') return (choice as OptimizerFactory)(parameters);
  switch (choice) {
    case 'sgd':
      return new SGD(parameters, options as Partial<SGDOptions>);
    case 'adam':
      return new Adam(parameters, options as Partial<AdamOptions>);
    case 'adamw':
      return new AdamW(parameters, options as Partial<AdamOptions>);
    default:
      throw new LayersError(`Unknown optimizer ${JSON.stringify(choice)}.`, {
        code: 'invalid-option',
        expected: [...optimizerNames, '(parameters) => new AdamW(parameters, {...})'],
        actual: typeof choice === 'object' ? 'an object (a tf.Optimizer?)' : choice,
        fix: "pass 'sgd', 'adam' or 'adamw' with optimizerOptions ({ lr, ... }), or a function that builds an @fsdp-ts/optim optimizer from the parameters it is given; tf.train optimizers cannot step shards.",
      });
  }
}
