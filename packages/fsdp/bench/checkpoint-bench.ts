/**
 * Checkpoint throughput at W=2 (thread ranks, cpu backend): saveCheckpoint and loadCheckpoint of a
 * GPT with AdamW state (>= 200 MB on disk), next to writing (+ fsync) and reading the same bytes
 * with plain fs calls in the same run. Prints a table and writes bench-results/checkpoint.json.
 *   node --conditions=@fsdp-ts/source --import tsx packages/fsdp/bench/checkpoint-bench.ts
 */
import {
  closeSync,
  fsyncSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readSync,
  rmSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { allocateShared, initProcessGroup, spawnThreadRanks } from '@fsdp-ts/collectives';
import { FullyShardedDataParallel, loadCheckpoint, saveCheckpoint } from '@fsdp-ts/fsdp';
import { backward, crossEntropy, GPT, TransformerBlock } from '@fsdp-ts/nn';
import { AdamW } from '@fsdp-ts/optim';
import { initBackend } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';

const WORLD_SIZE = 2;
const REPETITIONS = 3;
const config = { vocabSize: 4096, dModel: 512, nLayers: 5, nHeads: 8, seqLen: 16, seed: 1 };

interface Timings {
  bytes: number;
  save: number[];
  plainWrite: number[];
  load: number[];
  plainRead: number[];
  readFileSync: number[];
}

export async function benchRank({
  rank,
  args,
}: {
  rank: number;
  size: number;
  args: { root: string };
}): Promise<Timings> {
  await initBackend('cpu');
  const group = await initProcessGroup();
  try {
    const model = new FullyShardedDataParallel(new GPT(config), {
      group,
      autoWrapPolicy: [TransformerBlock],
    });
    const optimizer = new AdamW(model.parameters(), { lr: 1e-3 });
    const tokens = tf.tensor2d([[1, 2, 3, 4, 5, 6, 7, 8]], [1, 8], 'int32');
    backward(model, () => crossEntropy(model.forward(tokens), tokens));
    optimizer.step(); // creates the Adam state, so the checkpoint holds 3 × the parameters
    const flag = allocateShared(Int32Array, 1);
    const timed = (action: () => void) => {
      group.barrier().wait();
      const start = performance.now();
      action();
      flag[0] = 0;
      group.allReduce(flag).wait(); // the slowest rank's end
      return performance.now() - start;
    };
    const timings: Timings = {
      bytes: 0,
      save: [],
      plainWrite: [],
      load: [],
      plainRead: [],
      readFileSync: [],
    };
    const plainPath = join(args.root, `plain-${rank}.bin`);
    let saved = '';
    for (let repetition = 0; repetition < REPETITIONS; repetition++) {
      timings.save.push(
        timed(() => {
          const result = saveCheckpoint(args.root, { model, optimizer, step: repetition, keep: 1 });
          timings.bytes = result.bytes;
          saved = result.path;
        }),
      );
      // The same number of bytes, one write per 64 MiB, then fsync (what saveCheckpoint guarantees).
      const payload = Buffer.alloc(Math.min(timings.bytes, 64 << 20), 7);
      timings.plainWrite.push(
        timed(() => {
          const descriptor = openSync(plainPath, 'w');
          for (let done = 0; done < timings.bytes; ) {
            done += writeSync(descriptor, payload, 0, Math.min(payload.length, timings.bytes - done));
          }
          fsyncSync(descriptor);
          closeSync(descriptor);
        }),
      );
      timings.load.push(timed(() => loadCheckpoint(saved, { model, optimizer })));
      timings.plainRead.push(
        timed(() => {
          const descriptor = openSync(plainPath, 'r');
          for (let done = 0; done < timings.bytes; ) {
            const count = readSync(
              descriptor,
              payload,
              0,
              Math.min(payload.length, timings.bytes - done),
              done,
            );
            if (count === 0) break;
            done += count;
          }
          closeSync(descriptor);
        }),
      );
      // A naive reader: the whole file into a fresh buffer.
      timings.readFileSync.push(timed(() => readFileSync(plainPath)));
    }
    rmSync(plainPath, { force: true });
    tokens.dispose();
    return timings;
  } finally {
    await group.destroy();
  }
}

function stats(values: number[]) {
  const sorted = [...values].sort((left, right) => left - right);
  return { min: sorted[0]!, median: sorted[Math.floor(sorted.length / 2)]!, max: sorted.at(-1)! };
}

async function main(): Promise<void> {
  const root = mkdtempSync(join(tmpdir(), 'fsdp-checkpoint-bench-'));
  try {
    const results = (await spawnThreadRanks(WORLD_SIZE, new URL(import.meta.url), 'benchRank', {
      args: { root },
      timeoutMs: 900_000,
    })) as Timings[];
    const totalBytes = results.reduce((sum, result) => sum + result.bytes, 0);
    const megabytes = totalBytes / 1e6;
    const rows = (['save', 'plainWrite', 'load', 'plainRead', 'readFileSync'] as const).map((kind) => {
      const times = stats(results[0]![kind]);
      return {
        kind,
        ms: times,
        mbPerSecond: { best: megabytes / (times.min / 1000), median: megabytes / (times.median / 1000) },
      };
    });
    const ratio = (ours: string, plain: string) =>
      rows.find((row) => row.kind === plain)!.ms.median / rows.find((row) => row.kind === ours)!.ms.median;
    console.log(
      `checkpoint of ${megabytes.toFixed(1)} MB at W=${WORLD_SIZE} (shared, loaded machine: figures are noisy)`,
    );
    console.log('operation     min ms   median ms   max ms   MB/s (median)');
    for (const row of rows) {
      console.log(
        `${row.kind.padEnd(12)} ${row.ms.min.toFixed(0).padStart(7)} ${row.ms.median.toFixed(0).padStart(11)} ${row.ms.max.toFixed(0).padStart(8)} ${row.mbPerSecond.median.toFixed(0).padStart(13)}`,
      );
    }
    const summary = {
      saveVsPlainWrite: ratio('save', 'plainWrite'),
      loadVsPlainRead: ratio('load', 'plainRead'),
      loadVsReadFileSync: ratio('load', 'readFileSync'),
    };
    const percent = (value: number) => `${(value * 100).toFixed(0)}%`;
    console.log(
      `save / plain write+fsync: ${percent(summary.saveVsPlainWrite)}; load / plain read into a reused buffer: ${percent(summary.loadVsPlainRead)}; load / readFileSync: ${percent(summary.loadVsReadFileSync)} (target >= 50%)`,
    );
    const output = fileURLToPath(new URL('../../../bench-results/', import.meta.url));
    mkdirSync(output, { recursive: true });
    writeFileSync(
      join(output, 'checkpoint.json'),
      `${JSON.stringify({ date: new Date().toISOString(), worldSize: WORLD_SIZE, repetitions: REPETITIONS, totalBytes, config, rows, summary, note: 'shared machine with other agents running; page cache warm for reads' }, null, 2)}\n`,
    );
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) await main();
