/**
 * One rank of the training job (started by fsdp-run; rank 0 reports progress and writes the
 * outputs). Every rank runs the same steps, evaluations and generations: FSDP's forward is
 * collective, so ranks must call it together.
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { initProcessGroup, type ProcessGroup, restartRequested } from '@fsdp-ts/collectives';
import { FullyShardedDataParallel, listCheckpoints, resumeOrStart, saveCheckpoint } from '@fsdp-ts/fsdp';
import { backward, GPT, TransformerBlock } from '@fsdp-ts/nn';
import { AdamW, LinearWarmupCosineLR } from '@fsdp-ts/optim';
import { initBackend } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import { AdditionTask } from './addition-task';
import { type EvaluationRecord, encodeMessage, type RunSummary, type StepRecord } from './metrics';
import { greedyContinue, maskedCrossEntropy, scoreBatch } from './model-tools';
import { parseTrainOptions } from './options';
import { writeReport } from './report';
import type { Task } from './task';
import { TextTask } from './text-task';

function sumOverRanks(group: ProcessGroup, values: number[], op: 'sum' | 'avg'): number[] {
  const buffer = new Float32Array(new SharedArrayBuffer(4 * values.length));
  buffer.set(values);
  group.allReduce(buffer, { op }).wait();
  return Array.from(buffer);
}

async function main(): Promise<void> {
  const options = parseTrainOptions(process.argv.slice(2));
  await initBackend(options.backend);
  const group = await initProcessGroup();
  const { rank, size: worldSize } = group;
  // Set by `fsdp-run --nnodes MIN:MAX` on every rank alike (restartRequested is a collective).
  const elastic = process.env.FSDP_ELASTIC_ROUND !== undefined;
  const report = (text: string) => {
    if (rank === 0 && options.progress !== 'none') process.stdout.write(text);
  };
  const started = performance.now();
  try {
    const task: Task =
      options.data === undefined
        ? new AdditionTask(options.digits)
        : new TextTask(options.data, options.seqLen);
    const config = {
      vocabSize: task.vocabSize,
      dModel: options.dModel,
      nLayers: options.layers,
      nHeads: options.heads,
      seqLen: task.seqLen,
      seed: options.seed,
    };
    const model = new FullyShardedDataParallel(new GPT(config), {
      group,
      shardingStrategy: options.strategy,
      autoWrapPolicy: [TransformerBlock],
      flattenParameters: options.flattenParameters,
    });
    const parameterCount = model.module
      .parameters()
      .reduce((sum, parameter) => sum + parameter.shape.reduce((a, b) => a * b, 1), 0);
    const optimizer = new AdamW(model.parameters(), { lr: options.lr, weightDecay: options.weightDecay });
    const schedule = new LinearWarmupCosineLR(optimizer, {
      warmupSteps: Math.min(options.warmup, options.steps),
      totalSteps: options.steps,
      minLrRatio: 0.1,
    });
    report(
      encodeMessage({
        kind: 'start',
        totalSteps: options.steps,
        task: task.name,
        parameters: parameterCount,
        worldSize,
        strategy: options.strategy,
        collectivesBackend: group.backend,
      }),
    );
    let steps: StepRecord[] = [];
    let evaluations: EvaluationRecord[] = [];
    let metricName = '';
    // Resume from the newest complete checkpoint under --out/checkpoints when it is before --steps
    // (an interrupted run, or a new round of an elastic job at another world size: resumeOrStart
    // reshards it). A finished run's checkpoints, or --fresh, mean a new run: rank 0 clears them
    // first so the new run's checkpoints are the only ones.
    const checkpoints = resolve(options.out, 'checkpoints');
    const latest = options.fresh ? undefined : listCheckpoints(checkpoints).at(-1);
    let firstStep = 1;
    if (latest !== undefined && latest.step < options.steps) {
      const loaded = resumeOrStart(checkpoints, { model, optimizer });
      const history = loaded.extra as {
        steps: StepRecord[];
        evaluations: EvaluationRecord[];
        metricName: string;
      };
      steps = history.steps;
      evaluations = history.evaluations;
      metricName = history.metricName;
      firstStep = loaded.step + 1;
      for (let step = 0; step < loaded.step; step++) schedule.step();
      report(encodeMessage({ kind: 'resumed', step: loaded.step, path: loaded.path ?? latest.path }));
    } else {
      if (rank === 0) rmSync(checkpoints, { recursive: true, force: true });
      group.barrier().wait();
    }
    const evaluate = (step: number) => {
      const result = task.evaluate(rank, worldSize, {
        continue: greedyContinue(model),
        score: scoreBatch(model),
      });
      const [correct, total] = sumOverRanks(group, [result.correct, result.total], 'sum') as [number, number];
      const record = { step, metric: total === 0 ? 0 : correct / total, correct, total };
      metricName = result.metricName;
      evaluations.push(record);
      report(encodeMessage({ kind: 'evaluation', record, metricName, samples: result.samples.slice(0, 3) }));
    };
    if (firstStep === 1) evaluate(0);
    for (let step = firstStep; step <= options.steps; step++) {
      const batch = task.trainBatch(step, rank, options.batch);
      const begin = performance.now();
      const lr = optimizer.paramGroups[0]!.lr;
      const tokens = tf.tensor2d(batch.tokens, [batch.batch, batch.seqLen], 'int32');
      const localLoss = backward(model, () => maskedCrossEntropy(model.forward(tokens), batch));
      tokens.dispose();
      optimizer.step();
      optimizer.zeroGrad();
      schedule.step();
      const [loss] = sumOverRanks(group, [localLoss], 'avg') as [number];
      const stepMs = performance.now() - begin;
      const record: StepRecord = {
        step,
        loss,
        lr,
        stepMs,
        tokensPerSecond: (worldSize * batch.batch * batch.seqLen) / (stepMs / 1000),
        communicationWaitMs: model.statistics.allGatherWaitMs + model.statistics.reductionWaitMs,
      };
      steps.push(record);
      report(
        encodeMessage({
          kind: 'step',
          record,
          totalSteps: options.steps,
          elapsedSeconds: (performance.now() - started) / 1000,
        }),
      );
      const save = () =>
        saveCheckpoint(checkpoints, {
          model,
          optimizer,
          step,
          keep: 2,
          extra: { steps, evaluations, metricName },
        });
      if (step % options.evalEvery === 0 || step === options.steps) {
        evaluate(step);
        save();
      }
      // Under `fsdp-run --nnodes MIN:MAX`, a launcher joining asks for a restart at the larger
      // size: checkpoint here and exit; the next round resumes from it (see restartRequested).
      if (elastic && step < options.steps && restartRequested(group)) {
        if (step % options.evalEvery !== 0) save();
        return;
      }
    }
    const samples = task.generate({ continue: greedyContinue(model) });
    if (rank === 0) {
      const out = resolve(options.out);
      mkdirSync(out, { recursive: true });
      const summary: RunSummary = {
        task: task.name,
        metricName,
        worldSize,
        strategy: options.strategy,
        flattenParameters: options.flattenParameters,
        backend: options.backend,
        parameters: parameterCount,
        config: {
          dModel: config.dModel,
          layers: config.nLayers,
          heads: config.nHeads,
          seqLen: config.seqLen,
          vocabSize: config.vocabSize,
          batchPerRank: options.batch,
        },
        steps,
        evaluations,
        samples,
        wallSeconds: (performance.now() - started) / 1000,
        finishedAt: new Date().toISOString(),
      };
      writeFileSync(resolve(out, 'metrics.json'), `${JSON.stringify(summary, null, 2)}\n`);
      writeReport(out, summary);
      report(
        encodeMessage({
          kind: 'done',
          out,
          summary: {
            firstLoss: steps[0]?.loss ?? Number.NaN,
            finalLoss: steps.at(-1)?.loss ?? Number.NaN,
            firstMetric: evaluations[0]?.metric ?? 0,
            finalMetric: evaluations.at(-1)?.metric ?? 0,
          },
        }),
      );
    }
  } finally {
    await group.destroy();
  }
}

await main();
