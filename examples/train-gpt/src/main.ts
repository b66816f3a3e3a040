/**
 * `npm run demo`: starts `fsdp-run --nproc-per-node W worker.ts …` (tcp process group on loopback;
 * with `--launcher mpirun`, `mpirun -np W node worker.ts …`, the mpi backend) and renders rank 0's progress messages as a live progress bar. Every option is passed on to the
 * workers unchanged; see `--help`.
 */

import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { fsdpRunCommand } from '@fsdp-ts/collectives';
import { CommanderError } from 'commander';
import { decodeMessage } from './metrics';
import { parseTrainOptions } from './options';
import { formatDuration, ProgressBar } from './progress-bar';

async function main(): Promise<number> {
  const argv = process.argv.slice(2);
  let options: ReturnType<typeof parseTrainOptions>;
  try {
    options = parseTrainOptions(argv);
  } catch (error) {
    if (error instanceof CommanderError) return error.exitCode;
    process.stderr.write(`train-gpt: ${error instanceof Error ? error.message : String(error)}\n`);
    return 2;
  }
  const worker = fileURLToPath(new URL('./worker.ts', import.meta.url));
  const child =
    options.launcher === 'mpirun'
      ? spawn(
          'mpirun',
          [...mpirunFlags(options.worldSize), process.execPath, ...process.execArgv, worker, ...argv],
          {
            stdio: ['ignore', 'pipe', 'inherit'],
          },
        )
      : spawn(
          process.execPath,
          [...fsdpRunCommand(), '--nproc-per-node', String(options.worldSize), worker, ...argv],
          {
            stdio: ['ignore', 'pipe', 'inherit'],
          },
        );
  const bar = new ProgressBar(process.stdout, options.progress);
  let metric = 'eval pending';
  let succeeded = false;
  const lines = createInterface({ input: child.stdout! });
  lines.on('line', (line) => {
    const message = decodeMessage(line);
    if (message === undefined) {
      bar.log(line);
      return;
    }
    switch (message.kind) {
      case 'start':
        bar.log(
          `train-gpt: ${message.task}; GPT with ${message.parameters.toLocaleString('en-US')} parameters; FSDP ${message.strategy} over ${message.worldSize} processes; ${message.totalSteps} steps`,
        );
        break;
      case 'resumed':
        bar.log(`resumed from ${message.path} (step ${message.step})`);
        break;
      case 'step':
        bar.update({
          step: message.record.step,
          totalSteps: message.totalSteps,
          loss: message.record.loss,
          tokensPerSecond: message.record.tokensPerSecond,
          elapsedSeconds: message.elapsedSeconds,
          metric,
        });
        break;
      case 'evaluation': {
        metric = `${(message.record.metric * 100).toFixed(1)}% ${message.metricName.split(' ').at(-1)}`;
        bar.log(
          `step ${message.record.step}: ${message.metricName} ${(message.record.metric * 100).toFixed(1)}% (${message.record.correct}/${message.record.total})`,
        );
        for (const sample of message.samples) bar.log(`    ${sample}`);
        break;
      }
      case 'done': {
        bar.finish();
        const { firstLoss, finalLoss, firstMetric, finalMetric } = message.summary;
        bar.log(
          `done: loss ${firstLoss.toFixed(3)} → ${finalLoss.toFixed(3)}, metric ${(firstMetric * 100).toFixed(1)}% → ${(finalMetric * 100).toFixed(1)}%\n` +
            `report: ${message.out}/report.html  plot: ${message.out}/curves.svg`,
        );
        succeeded = true;
        break;
      }
    }
  });
  const started = performance.now();
  const code = await new Promise<number>((resolve) =>
    child.on('close', (exitCode) => resolve(exitCode ?? 1)),
  );
  bar.finish();
  if (code === 0 && succeeded)
    process.stdout.write(`finished in ${formatDuration((performance.now() - started) / 1000)}\n`);
  return code;
}

/**
 * One host's mpirun: W ranks, however many cores there are, not bound to one core each (a rank
 * runs several threads); root may run it (containers, CI).
 */
function mpirunFlags(worldSize: number): string[] {
  const root = process.getuid?.() === 0 ? ['--allow-run-as-root'] : [];
  return [...root, '--oversubscribe', '--bind-to', 'none', '-np', String(worldSize)];
}

process.exitCode = await main();
