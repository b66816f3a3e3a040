#!/usr/bin/env node
import { CommanderError } from 'commander';
import { parseLaunchArguments } from '../launcher/launch-options.js';
import { runLauncher } from '../launcher/run-launcher.js';

/**
 * `fsdp-run --nproc-per-node N [--nnodes M --node-rank K --master-addr A --master-port P]
 *  [--max-restarts R] [--timeout S] script [args]`: see "Launcher" in the package README.
 */
async function main(): Promise<number> {
  try {
    return await runLauncher(parseLaunchArguments(process.argv.slice(2)));
  } catch (error) {
    if (error instanceof CommanderError) return error.exitCode;
    process.stderr.write(`fsdp-run: ${error instanceof Error ? error.message : String(error)}\n`);
    return 2;
  }
}

main().then((code) => {
  process.exitCode = code;
});
