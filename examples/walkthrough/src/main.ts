/**
 * `npm start`: each layer of fsdp-ts used alone, for users who pick single packages.
 *   1. @fsdp-ts/tensor: views over a storage
 *   2. @fsdp-ts/collectives: an all-reduce between two processes (through fsdp-run)
 *   3. @fsdp-ts/flat-param: a flat parameter and its views
 *   4. @fsdp-ts/optim: an optimizer stepping views
 */

import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { fsdpRunCommand } from '@fsdp-ts/collectives';
import { flatParameter } from './flat-parameter';
import { optimizerOnViews } from './optimizer-on-views';
import { viewsOverStorage } from './views-over-storage';

const log = (line: string) => process.stdout.write(`  ${line}\n`);

process.stdout.write('1. @fsdp-ts/tensor: views over one storage\n');
viewsOverStorage(log);

process.stdout.write(
  '2. @fsdp-ts/collectives: an all-reduce between two processes (fsdp-run, tcp on loopback)\n',
);
const rankScript = fileURLToPath(new URL('./all-reduce-rank.ts', import.meta.url));
const launched = spawnSync(process.execPath, [...fsdpRunCommand(), '--nproc-per-node', '2', rankScript], {
  encoding: 'utf8',
  timeout: 120_000,
});
for (const line of launched.stdout
  .split('\n')
  .filter((text) => text.length > 0)
  .sort())
  log(line);
if (launched.status !== 0) {
  process.stderr.write(launched.stderr);
  process.exitCode = 1;
}

process.stdout.write('3. @fsdp-ts/flat-param: a flat parameter sharded over two ranks\n');
flatParameter(log);

process.stdout.write('4. @fsdp-ts/optim: SGD stepping 1-D views of a flat buffer\n');
optimizerOnViews(log);
