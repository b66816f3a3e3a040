import { Command, InvalidArgumentError, Option } from 'commander';

export interface TrainOptions {
  worldSize: number;
  steps: number;
  batch: number;
  dModel: number;
  layers: number;
  heads: number;
  digits: number;
  seqLen: number;
  data: string | undefined;
  strategy: 'full-shard' | 'shard-grad-op' | 'no-shard';
  flattenParameters: boolean;
  lr: number;
  warmup: number;
  weightDecay: number;
  evalEvery: number;
  backend: 'wasm' | 'cpu';
  out: string;
  seed: number;
  progress: 'bar' | 'lines' | 'none';
  fresh: boolean;
  launcher: 'fsdp-run' | 'mpirun';
}

function positiveInteger(value: string): number {
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 1)
    throw new InvalidArgumentError(`expected an integer >= 1, got '${value}'.`);
  return parsed;
}

function nonNegativeNumber(value: string): number {
  const parsed = Number(value);
  if (!Number.isFinite(parsed) || parsed < 0)
    throw new InvalidArgumentError(`expected a number >= 0, got '${value}'.`);
  return parsed;
}

/** The command line shared by the launcher side (main.ts) and every rank (worker.ts). */
export function trainCommand(): Command {
  return new Command('train-gpt')
    .description(
      'Train a GPT with FullyShardedDataParallel on local worker processes (fsdp-run and tcp on loopback, or mpirun and mpi).',
    )
    .option('-w, --world-size <n>', 'worker processes', positiveInteger, 2)
    .option('-s, --steps <n>', 'optimizer steps', positiveInteger, 800)
    .option('-b, --batch <n>', 'sequences per rank per step', positiveInteger, 64)
    .option('--d-model <n>', 'model width', positiveInteger, 64)
    .option('--layers <n>', 'TransformerBlocks (each one FSDP unit)', positiveInteger, 2)
    .option('--heads <n>', 'attention heads', positiveInteger, 4)
    .option('--digits <n>', 'digits per operand of the built-in addition task', positiveInteger, 2)
    .option('--seq-len <n>', 'sequence length with --data', positiveInteger, 64)
    .option('--data <file>', 'train byte-level on this UTF-8 file instead of the addition task')
    .addOption(
      new Option('--strategy <name>', 'sharding strategy')
        .choices(['full-shard', 'shard-grad-op', 'no-shard'])
        .default('full-shard'),
    )
    .option('--no-flatten-parameters', 'one communication unit per parameter (slower; for comparison)')
    .option('--lr <value>', 'peak learning rate (AdamW)', nonNegativeNumber, 3e-3)
    .option('--warmup <n>', 'linear warm-up steps before the cosine decay', positiveInteger, 20)
    .option('--weight-decay <value>', 'AdamW weight decay', nonNegativeNumber, 0.01)
    .option('--eval-every <n>', 'evaluate every n steps', positiveInteger, 25)
    .addOption(new Option('--backend <name>', 'tfjs backend').choices(['wasm', 'cpu']).default('wasm'))
    .option('-o, --out <dir>', 'where the plot, report and metrics go', 'output')
    .option('--fresh', 'ignore the checkpoints in --out and train from scratch', false)
    .option('--seed <n>', 'model initialisation seed', nonNegativeNumber, 0)
    .addOption(
      new Option('--progress <style>', 'progress display').choices(['bar', 'lines', 'none']).default('bar'),
    )
    .addOption(
      new Option(
        '--launcher <name>',
        'how the ranks start: fsdp-run (tcp backend) or mpirun (Open MPI, mpi backend)',
      )
        .choices(['fsdp-run', 'mpirun'])
        .default('fsdp-run'),
    );
}

export function parseTrainOptions(argv: readonly string[]): TrainOptions {
  const command = trainCommand().exitOverride();
  command.parse([...argv], { from: 'user' });
  const options = command.opts() as TrainOptions;
  if (options.dModel % options.heads !== 0) {
    throw new InvalidArgumentError(
      `--d-model ${options.dModel} must be a multiple of --heads ${options.heads}.`,
    );
  }
  return options;
}
