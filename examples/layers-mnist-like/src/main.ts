/**
 * `npm start`: trains the CNN once with single-process model.fit and once with ShardedTrainer on
 * --world-size processes (fsdp-run, tcp on loopback), and prints both results side by side.
 * Extra arguments (--epochs, --samples, ...) go to both runs.
 */

import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { fsdpRunCommand } from '@fsdp-ts/collectives';
import { parseExampleOptions } from './options';
import type { RunResult } from './train';

const tsx = ['--conditions=@fsdp-ts/source', '--import', 'tsx'];

function run(args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { stdio: 'inherit' });
    child.on('close', (code) =>
      code === 0 ? resolve() : reject(new Error(`${args.at(-1)} exited with ${code}`)),
    );
  });
}

const argv = process.argv
  .slice(2)
  .filter((argument, index, all) => argument !== '--out' && all[index - 1] !== '--out');
const options = parseExampleOptions(argv);
const directory = mkdtempSync(join(tmpdir(), 'layers-mnist-like-'));
const singleOut = join(directory, 'single.json');
const shardedOut = join(directory, 'sharded.json');
const here = (file: string) => fileURLToPath(new URL(file, import.meta.url));

console.log(`single process: model.fit, ${options.epochs} epochs of ${options.samples} samples`);
await run([...tsx, here('./single.ts'), ...argv, '--out', singleOut]);
console.log(`${options.worldSize} processes: fsdp-run --nproc-per-node ${options.worldSize}, ShardedTrainer`);
await run([
  ...fsdpRunCommand(),
  '--nproc-per-node',
  String(options.worldSize),
  here('./rank.ts'),
  ...argv,
  '--out',
  shardedOut,
]);
const results = [singleOut, shardedOut].map((path) => JSON.parse(readFileSync(path, 'utf8')) as RunResult);
console.log('\n| run | val accuracy | val loss | seconds | samples/s |\n| --- | --- | --- | --- | --- |');
for (const result of results) {
  console.log(
    `| ${result.mode} | ${result.valAccuracy.toFixed(4)} | ${result.valLoss.toFixed(4)} | ${result.seconds.toFixed(1)} | ${result.samplesPerSecond.toFixed(0)} |`,
  );
}
if (process.env.LAYERS_EXAMPLE_RESULT !== undefined) {
  const { writeFileSync } = await import('node:fs');
  writeFileSync(process.env.LAYERS_EXAMPLE_RESULT, JSON.stringify(results));
}
