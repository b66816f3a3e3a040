#!/usr/bin/env node
import { CommanderError } from 'commander';
import { runElasticLauncher } from '../launcher/elastic-agent.js';
import { parseLaunchArguments } from '../launcher/launch-options.js';
import { runLauncher } from '../launcher/run-launcher.js';

/**
 * `fsdp-run --nproc-per-node N [--nnodes M --node-rank K --master-addr A --master-port P]
 *  [--max-restarts R] [--timeout S] script [args]`: see "Launcher" in the package README.
 */
async function main(): Promise<number> {
  try {
    const options = parseLaunchArguments(process.argv.slice(2));
    return await (options.elastic === undefined ? runLauncher(options) : runElasticLauncher(options));
  } catch (error) {
    if (error instanceof CommanderError) return error.exitCode;
    process.stderr.write(`fsdp-run: ${error instanceof Error ? error.message : String(error)}\n`);
    return 2;
  }
}

// Exit explicitly: every worker has exited by now, and a store connection still retrying after an
// interruption must not keep the launcher alive until its deadline.
// Flush stdout and stderr first: process.exit drops what is still queued for a pipe.
main().then((code) => {
  process.stdout.write('', () => process.stderr.write('', () => process.exit(code)));
});
