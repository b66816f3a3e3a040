import { adviceForName, type ForeignNames } from '@fsdp-ts/errors';
import type { Command } from 'commander';
import { CollectiveError } from '../errors.js';

/**
 * torchrun's flags (each also in its other spelling: `--nproc_per_node` and `--nproc-per-node`
 * are the same key, see [Note: option keys] in @fsdp-ts/errors), with what fsdp-run calls them.
 * Flags fsdp-run shares with torchrun (`--nnodes`) are simply known.
 */
export const torchrunFlags: ForeignNames = {
  '--nproc_per_node':
    "torchrun's --nproc_per_node is --nproc-per-node here (a number; 'gpu' and 'auto' are not accepted)",
  '--node_rank': "torchrun's --node_rank is --node-rank here",
  '--master_addr': "torchrun's --master_addr is --master-addr here",
  '--master_port': "torchrun's --master_port is --master-port here",
  '--max_restarts': "torchrun's --max_restarts is --max-restarts here",
  '--rdzv_endpoint':
    'no rendezvous endpoint here: pass its host and port as --master-addr HOST --master-port PORT (with --nnodes MIN:MAX for an elastic job)',
  '--rdzv_backend':
    "no equivalent: fsdp-run's rendezvous is built in (the store on node 0, or the Store-based rendezvous of --nnodes MIN:MAX); remove it",
  '--rdzv_id':
    'no equivalent: a job is its --master-addr:--master-port and its job secret (FSDP_JOB_SECRET); remove it',
  '--rdzv_conf':
    'no equivalent: its settings are flags here (--timeout, --join-timeout, --last-call, --heartbeat-timeout)',
  '--standalone':
    'no such flag: a single-node job is the default (--nnodes 1; --master-port 0 picks a free port); remove it',
  '--monitor_interval': 'no equivalent: fsdp-run learns of a worker exit at once; remove it',
  '--start_method': 'no equivalent: every worker is its own node process; remove it',
  '--redirects':
    "no equivalent: workers' output goes to fsdp-run's stdout and stderr, each line prefixed with [rank R]",
  '--tee':
    "no equivalent: workers' output goes to fsdp-run's stdout and stderr, each line prefixed with [rank R]",
  '--log_dir': 'no equivalent flag; remove it',
  '--role': 'no equivalent; remove it',
  '--local_addr': "the nearest is --socket-addr (the address this node's data sockets bind to)",
  '--no_python': 'no equivalent: a .js/.mjs/.cjs script runs with node, a .ts script through tsx',
  '--module': 'no equivalent: pass the path of the script',
  '-m': 'no equivalent: pass the path of the script',
  '--run_path': 'no equivalent: pass the path of the script',
  '--local_ranks_filter': 'no equivalent; remove it',
};

/**
 * Throws CollectiveError('unknown-option') at the first flag before the script that `program`
 * does not declare, naming the fsdp-run flag it stands for (torchrun's) or the nearest one.
 * Runs before commander parses, so `--nproc_per_node 2 train.ts` is named as torchrun's flag
 * rather than reported as a missing --nproc-per-node. Arguments after the script (or `--`) are
 * the script's and are not looked at.
 */
export function checkLaunchFlags(argv: readonly string[], program: Command): void {
  const takesValue = new Map<string, boolean>([
    ['--help', false],
    ['-h', false],
  ]);
  for (const option of program.options) {
    for (const flag of [option.long, option.short]) {
      if (flag !== undefined) takesValue.set(flag, option.required || option.optional);
    }
  }
  for (let index = 0; index < argv.length; index++) {
    const argument = argv[index]!;
    if (argument === '--' || !argument.startsWith('-') || argument === '-') return;
    const flag = argument.split('=')[0]!;
    const value = takesValue.get(flag);
    if (value === undefined) {
      const advice = adviceForName(flag, [...takesValue.keys()], torchrunFlags);
      throw new CollectiveError(`unknown flag '${flag}' (${advice}).`, {
        code: 'unknown-option',
        expected: [...takesValue.keys()],
        actual: flag,
        fix: 'rename or remove it; fsdp-run --help lists the flags.',
      });
    }
    if (value && !argument.includes('=')) index++;
  }
}
