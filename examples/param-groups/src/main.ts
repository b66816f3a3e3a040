/** `npm start`: runs rank.ts on --world-size local processes through fsdp-run (tcp on loopback). */

import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { fsdpRunCommand } from '@fsdp-ts/collectives';
import { CommanderError } from 'commander';
import { parseExampleOptions } from './options';

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
  [...fsdpRunCommand(), '--nproc-per-node', String(worldSize), rankScript, ...argv],
  {
    stdio: 'inherit',
  },
);
child.on('close', (code) => {
  process.exitCode = code ?? 1;
});
