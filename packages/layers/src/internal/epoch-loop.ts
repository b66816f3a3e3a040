import type { ProcessGroup } from '@fsdp-ts/collectives';
import type { History, LayersModel } from '@tensorflow/tfjs-layers';
import type { ShardedFitArgs } from '../sharded-trainer-options';
import { createCallbackList } from './callbacks';
import { WeightedMeans } from './epoch-logs';
import type { Batch } from './validate-data';

/** What the epoch loop runs: fit's tensors or fitDataset's dataset, as batches of an epoch. */
export interface TrainingPlan {
  epochs: number;
  initialEpoch: number;
  verbose: 0 | 1;
  callbacks: ShardedFitArgs['callbacks'];
  /** model.fit's `samples`/`batchSize`, or model.fitDataset's `steps` (and nulls). */
  params: Record<string, number | null>;
  doValidation: boolean;
  validate(): Record<string, number> | Promise<Record<string, number>>;
  /** The global batches of an epoch; `indices` null: all rows in order. */
  batches(epoch: number): AsyncIterable<{ batch: Batch; indices: Int32Array | null }>;
  /**
   * Checked after each epoch's batches: true ends training after this epoch's onEpochEnd, without
   * its validation (fitDataset's shared iterator ran out, as model.fitDataset interrupts).
   */
  interrupted?(): boolean;
}

/** What the epoch loop uses of the trainer. */
export interface EpochLoopParts {
  readonly model: LayersModel;
  readonly group: ProcessGroup;
  /** The loss and metric names, as model.fit logs them. */
  readonly names: readonly string[];
  readonly log: (line: string) => void;
  /** One optimizer step on the global batch `rows` of `batch`: [loss, ...metrics]. */
  trainBatch(batch: Batch, rows: Int32Array): number[];
  /** Whether any rank's callbacks asked to stop (a collective). */
  agreeToStop(): boolean;
  /** Around the epochs, after onTrainBegin's setup: prepares the model for steps; returns the undo. */
  beginTraining(): () => void;
}

/**
 * The epoch loop shared by fit and fitDataset: callbacks (model.fit's order), per-batch and epoch
 * logs, validation, the progress line, and a stop every rank agrees on.
 */
export async function runEpochs(parts: EpochLoopParts, plan: TrainingPlan): Promise<History> {
  const { list, history } = createCallbackList(plan.callbacks);
  const { model, names } = parts;
  list.setModel(model);
  list.setParams({
    epochs: plan.epochs,
    initialEpoch: plan.initialEpoch,
    ...plan.params,
    verbose: plan.verbose,
    doValidation: plan.doValidation,
    metrics: plan.doValidation ? [...names, ...names.map((name) => `val_${name}`)] : [...names],
  });
  const endTraining = parts.beginTraining();
  try {
    await list.onTrainBegin();
    for (let epoch = plan.initialEpoch; epoch < plan.epochs; epoch++) {
      const started = performance.now();
      await list.onEpochBegin(epoch);
      const means = new WeightedMeans();
      let batchIndex = 0;
      for await (const { batch, indices } of plan.batches(epoch)) {
        const rows = indices ?? identityOrder(batch.xs[0]!.shape[0]!);
        const count = rows.length;
        await list.onBatchBegin(batchIndex, { batch: batchIndex, size: count });
        const values = parts.trainBatch(batch, rows);
        means.add([...names], values, count);
        const batchLogs: Record<string, number> = { batch: batchIndex, size: count };
        names.forEach((name, index) => {
          batchLogs[name] = values[index]!;
        });
        await list.onBatchEnd(batchIndex, batchLogs);
        batchIndex++;
      }
      // Agreed on every rank (the batch sizes were exchanged): no collective needed.
      const interrupted = plan.interrupted?.() === true;
      const epochLogs = means.means();
      if (plan.doValidation && !interrupted) Object.assign(epochLogs, await plan.validate());
      await list.onEpochEnd(epoch, epochLogs);
      if (plan.verbose !== 0 && parts.group.rank === 0)
        parts.log(progressLine(epoch, plan.epochs, started, epochLogs));
      if (interrupted || parts.agreeToStop()) break;
    }
    await list.onTrainEnd();
  } finally {
    endTraining();
  }
  return history;
}

function identityOrder(count: number): Int32Array {
  return Int32Array.from({ length: count }, (_, index) => index);
}

function progressLine(epoch: number, epochs: number, started: number, logs: Record<string, number>): string {
  const seconds = ((performance.now() - started) / 1000).toFixed(2);
  const values = Object.entries(logs)
    .map(([name, value]) => `${name}=${value.toPrecision(4)}`)
    .join(' ');
  return `Epoch ${epoch + 1}/${epochs} · ${seconds} s · ${values}`;
}
