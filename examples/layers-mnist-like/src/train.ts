/**
 * One training run, single-process (`model.fit`) or on a process group (`ShardedTrainer.fit`): the
 * same model, data and hyperparameters. Returns the validation accuracy and the wall time.
 */
import type { ProcessGroup } from '@fsdp-ts/collectives';
import { ShardedTrainer, type ShardedTrainerStrategy } from '@fsdp-ts/layers';
import * as tf from '@tensorflow/tfjs-core';
import type * as tfl from '@tensorflow/tfjs-layers';
import { makeDigits } from './digits';
import { buildModel } from './model';
import type { ExampleOptions } from './options';

export interface RunResult {
  mode: string;
  worldSize: number;
  valAccuracy: number;
  valLoss: number;
  seconds: number;
  samplesPerSecond: number;
}

export async function train(
  options: ExampleOptions,
  group: ProcessGroup | null,
  strategy: ShardedTrainerStrategy = 'shard-gradients',
): Promise<RunResult> {
  const train = makeDigits(options.samples, 1);
  const validation = makeDigits(options.validation, 2);
  const model = buildModel();
  const fitArgs = {
    epochs: options.epochs,
    batchSize: options.batchSize,
    shuffleSeed: 7,
    validationData: [validation.x, validation.y] as [tf.Tensor, tf.Tensor],
    verbose: 1 as const,
  };
  const started = performance.now();
  let history: tfl.History;
  if (group === null) {
    model.compile({
      optimizer: tf.train.adam(options.learningRate),
      loss: 'categoricalCrossentropy',
      metrics: ['accuracy'],
    });
    history = await model.fit(train.x, train.y, { ...fitArgs, verbose: 0 });
  } else {
    const trainer = new ShardedTrainer(model, {
      group,
      strategy,
      optimizer: 'adam',
      optimizerOptions: { lr: options.learningRate, eps: 1e-7 },
    });
    history = await trainer.fit(train.x, train.y, fitArgs);
  }
  const seconds = (performance.now() - started) / 1000;
  const logs = history.history as Record<string, number[]>;
  return {
    mode: group === null ? 'model.fit (1 process)' : `ShardedTrainer ${strategy} (${group.size} processes)`,
    worldSize: group?.size ?? 1,
    valAccuracy: logs.val_acc!.at(-1)!,
    valLoss: logs.val_loss!.at(-1)!,
    seconds,
    samplesPerSecond: (options.samples * options.epochs) / seconds,
  };
}
