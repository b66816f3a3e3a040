import { Command, InvalidArgumentError, Option } from 'commander';

export interface ExampleOptions {
  worldSize: number;
  steps: number;
  batch: number;
  strategy: 'full-shard' | 'shard-grad-op' | 'no-shard';
  out: string | undefined;
}

function positiveInteger(value: string): number {
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 1)
    throw new InvalidArgumentError(`expected an integer >= 1, got '${value}'.`);
  return parsed;
}

/** Shared by main.ts (which starts fsdp-run) and rank.ts (each process). */
export function parseExampleOptions(argv: readonly string[]): ExampleOptions {
  const command = new Command('param-groups')
    .description(
      'Per-submodule optimizers on an FSDP-wrapped model across processes, checked against an unwrapped run.',
    )
    .option('-w, --world-size <n>', 'worker processes', positiveInteger, 2)
    .option('-s, --steps <n>', 'optimizer steps', positiveInteger, 8)
    .option('-b, --batch <n>', 'samples per rank per step', positiveInteger, 4)
    .addOption(
      new Option('--strategy <name>', 'sharding strategy')
        .choices(['full-shard', 'shard-grad-op', 'no-shard'])
        .default('full-shard'),
    )
    .option('-o, --out <file>', 'also write the comparison as JSON here')
    .exitOverride();
  command.parse([...argv], { from: 'user' });
  return command.opts() as ExampleOptions;
}
