/**
 * One process of the example (started by fsdp-run). Every rank trains the FSDP-wrapped model on its
 * samples; rank 0 also trains the unwrapped model on all ranks' samples and compares, step by step,
 * the loss and each group's update norm.
 */
import { writeFileSync } from 'node:fs';
import { initProcessGroup, type ProcessGroup } from '@fsdp-ts/collectives';
import { FullyShardedDataParallel } from '@fsdp-ts/fsdp';
import { Linear } from '@fsdp-ts/nn';
import { initBackend } from '@fsdp-ts/tensor';
import { parseExampleOptions } from './options';
import { TaggerModel } from './tagger-model';
import { groupNames, train } from './training';

// Float32 with different summation orders (mean of per-rank means vs one mean; sharded vs whole
// AdamW): update norms and losses agree to about 1e-6 relative; 1e-4 leaves room and still
// catches a wrong group (a different lr or weight decay changes the norm by far more).
const TOLERANCE = 1e-4;

function reduceSum(group: ProcessGroup, values: number[], op: 'sum' | 'avg' = 'sum'): number[] {
  const buffer = new Float32Array(new SharedArrayBuffer(4 * values.length));
  buffer.set(values);
  group.allReduce(buffer, { op }).wait();
  return Array.from(buffer);
}

const options = parseExampleOptions(process.argv.slice(2));
await initBackend('wasm');
const group = await initProcessGroup();
const { rank, size } = group;
try {
  const inner = new TaggerModel();
  const before = inner.encoder.parameters();
  const model = new FullyShardedDataParallel(inner, {
    group,
    shardingStrategy: options.strategy,
    autoWrapPolicy: [Linear],
  });
  const after = model.module.encoder.parameters();
  const sameObjects = before.length > 0 && before.every((parameter, index) => parameter === after[index]);
  const local = train(
    model,
    (tokens) => model.forward(tokens),
    model.module,
    options.steps,
    rank * options.batch,
    options.batch,
  );
  // Each element of a sharded Parameter lives on exactly one rank: the global squared norm is the sum.
  const wrapped = local.map((report) => {
    const [loss, ...squares] = reduceSum(group, [report.loss / size, ...report.squaredUpdateNorms]);
    return { loss: loss!, norms: squares.map(Math.sqrt) };
  });
  if (rank === 0) {
    const unwrappedModel = new TaggerModel();
    const unwrapped = train(
      unwrappedModel,
      (tokens) => unwrappedModel.forward(tokens),
      unwrappedModel,
      options.steps,
      0,
      size * options.batch,
    ).map((report) => ({
      loss: report.loss,
      norms: report.squaredUpdateNorms.map(Math.sqrt),
    }));
    const relative = (a: number, b: number) => Math.abs(a - b) / Math.max(Math.abs(b), 1e-6);
    let worst = 0;
    const lines = [
      `FSDP ${options.strategy} over ${size} processes vs the unwrapped model on the same ${size * options.batch} samples per step`,
      `encoder.parameters() after wrapping are the objects from before: ${sameObjects}`,
      '',
      `step | loss FSDP / unwrapped | ${groupNames.map((name) => `‖Δ ${name}‖ FSDP / unwrapped`).join(' | ')}`,
    ];
    wrapped.forEach((row, step) => {
      const expected = unwrapped[step]!;
      worst = Math.max(
        worst,
        relative(row.loss, expected.loss),
        ...row.norms.map((norm, index) => relative(norm, expected.norms[index]!)),
      );
      const cells = row.norms.map(
        (norm, index) => `${norm.toExponential(4)} / ${expected.norms[index]!.toExponential(4)}`,
      );
      lines.push(
        `${String(step + 1).padStart(4)} | ${row.loss.toFixed(6)} / ${expected.loss.toFixed(6)} | ${cells.join(' | ')}`,
      );
    });
    const frozenUntouched = wrapped.every((row) => row.norms[3] === 0);
    const matches = sameObjects && frozenUntouched && worst <= TOLERANCE;
    lines.push(
      '',
      `largest relative difference ${worst.toExponential(2)} (tolerance ${TOLERANCE}); frozen embedding untouched: ${frozenUntouched}`,
      matches ? 'OK: every group matches the unwrapped run.' : 'MISMATCH: see the table above.',
    );
    process.stdout.write(`${lines.join('\n')}\n`);
    if (options.out !== undefined) {
      writeFileSync(
        options.out,
        `${JSON.stringify({ sameObjects, frozenUntouched, worst, tolerance: TOLERANCE, matches, wrapped, unwrapped }, null, 2)}\n`,
      );
    }
    if (!matches) process.exitCode = 1;
  }
} finally {
  await group.destroy();
}
