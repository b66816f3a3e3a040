/** `npm start`: runs rank.ts on --world-size local processes through fsdp-run (tcp on loopback). */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { CommanderError } from 'commander';
import { parseExampleOptions } from './options';

/** The fsdp-run command line: from source through tsx when this example runs from source. */
function launcherCommand(): string[] {
  const entry = import.meta.resolve('@fsdp-ts/collectives');
  if (entry.endsWith('.ts')) {
    return [
      '--conditions=@fsdp-ts/source',
      '--import',
      'tsx',
      fileURLToPath(new URL('./bin/fsdp-run.ts', entry)),
    ];
  }
  return [fileURLToPath(new URL('./bin/fsdp-run.js', entry))];
}

const argv = process.argv.slice(2);
let worldSize: number;
try {
  worldSize = parseExampleOptions(argv).worldSize;
} catch (error) {
  process.exit(error instanceof CommanderError ? error.exitCode : 2);
}
const rankScript = fileURLToPath(new URL('./rank.ts', import.meta.url));
const child = spawn(
  process.execPath,
  [...launcherCommand(), '--nproc-per-node', String(worldSize), rankScript, ...argv],
  {
    stdio: 'inherit',
  },
);
child.on('close', (code) => {
  process.exitCode = code ?? 1;
});
