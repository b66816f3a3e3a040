import { adviceForName, type ForeignNames } from '@fsdp-ts/errors';
import { Command, InvalidArgumentError, Option } from 'commander';
import { CollectiveError } from '../errors.js';
import { parseMemorySize } from './memory-cap.js';

/** Everything `fsdp-run` was asked to do. */
export interface LaunchOptions {
  nprocPerNode: number;
  nnodes: number;
  nodeRank: number;
  masterAddr: string;
  /** 0 on a single node: pick a free port. Fixed (and required) when nnodes > 1. */
  masterPort: number;
  maxRestarts: number;
  /** Seconds for the store connection and the launchers' rendezvous. */
  timeoutSeconds: number;
  /** Whether --timeout was given: only then it becomes the workers' FSDP_TIMEOUT_MS. */
  timeoutGiven: boolean;
  /** Seconds between SIGTERM and SIGKILL when stopping workers. */
  gracePeriodSeconds: number;
  /** --memory-per-rank in bytes: each worker in its own memory cgroup with this limit. */
  memoryPerRankBytes: number | undefined;
  socketIfname: string | undefined;
  socketAddr: string | undefined;
  /** --secure: workers get FSDP_SECURE=1 (TLS on every data connection). */
  secure: boolean;
  /** --log-dir: where the run directory of failure records goes (default: the OS temp directory). */
  logDirectory?: string;
  script: string;
  scriptArguments: string[];
  /** Set by `--nnodes MIN:MAX`: membership comes from the rendezvous on the Store (see ElasticOptions). */
  elastic?: ElasticOptions;
}

/** `fsdp-run --nnodes MIN:MAX`: see "Elastic jobs" in the package README. */
export interface ElasticOptions {
  minNodes: number;
  maxNodes: number;
  /** A launcher silent for this long is lost (--heartbeat-timeout, default 10). */
  heartbeatTimeoutSeconds: number;
  /** After the pre-restart signal, how long workers may take to checkpoint and exit (--restart-grace). */
  restartGraceSeconds: number;
  /** Once MIN launchers wait, how long to wait for more before a round starts (--last-call). */
  lastCallSeconds: number;
  /** Fewer than MIN launchers for this long ends the job (--join-timeout, default 300). */
  joinTimeoutSeconds: number;
}

/** `--nnodes N` (fixed) or `MIN:MAX` (elastic). */
function nodeCount(value: string): { min: number; max: number; elastic: boolean } {
  const match = /^(\d+)(?::(\d+))?$/.exec(value);
  const min = Number(match?.[1]);
  const max = match?.[2] === undefined ? min : Number(match[2]);
  if (match === null || min < 1 || max < min) {
    throw new InvalidArgumentError(`expected N or MIN:MAX with 1 <= MIN <= MAX, got '${value}'.`);
  }
  return { min, max, elastic: match[2] !== undefined };
}

function count(minimum: number) {
  return (value: string): number => {
    if (!/^\d+$/.test(value) || Number(value) < minimum) {
      throw new InvalidArgumentError(`expected an integer >= ${minimum}, got '${value}'.`);
    }
    return Number(value);
  };
}

function seconds(value: string): number {
  const parsed = Number(value);
  if (!Number.isFinite(parsed) || parsed <= 0)
    throw new InvalidArgumentError(`expected seconds > 0, got '${value}'.`);
  return parsed;
}

/**
 * Parses `fsdp-run` arguments (`argv` without node and the script path). Options after the
 * script belong to the script. Defaults for --nnodes, --node-rank and --master-addr come from
 * Slurm (SLURM_NNODES, SLURM_NODEID, first host of the nodelist is left to the caller) and from
 * MASTER_ADDR / MASTER_PORT when set. Throws a CollectiveError (code 'launch') on bad input.
 */
export function parseLaunchArguments(
  argv: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
): LaunchOptions {
  const defaultNodes = numberFrom(env.SLURM_NNODES, 1);
  const program = new Command('fsdp-run')
    .description('Start N worker processes per node with the torchrun-style environment contract.')
    .requiredOption('--nproc-per-node <n>', 'worker processes on this node', count(1))
    .addOption(
      new Option('--nnodes <m>', 'nodes (hosts) in the job: N, or MIN:MAX for an elastic job')
        .argParser(nodeCount)
        // The parsed default is an object; --help shows the count it stands for.
        .default(nodeCount(String(defaultNodes)), String(defaultNodes)),
    )
    .option('--heartbeat-timeout <seconds>', 'elastic: a launcher silent this long is lost', seconds, 10)
    .option(
      '--restart-grace <seconds>',
      'elastic: time to checkpoint after the pre-restart signal',
      seconds,
      30,
    )
    .option('--last-call <seconds>', 'elastic: wait this long for more launchers once MIN are in', seconds, 1)
    .option(
      '--join-timeout <seconds>',
      'elastic: end the job after this long with fewer than MIN',
      seconds,
      300,
    )
    .option(
      '--node-rank <k>',
      'this node, 0-based; node 0 runs the store',
      count(0),
      numberFrom(env.SLURM_NODEID, 0),
    )
    .option(
      '--master-addr <address>',
      'address of node 0 (the store binds to it there)',
      env.MASTER_ADDR ?? '127.0.0.1',
    )
    .option(
      '--master-port <port>',
      'store port; 0 picks a free one (single node only)',
      count(0),
      numberFrom(env.MASTER_PORT, 0),
    )
    .option('--max-restarts <r>', 'restart the whole group up to r times after a failure', count(0), 0)
    .option('--timeout <seconds>', 'rendezvous and store timeout', seconds, 300)
    .option('--grace-period <seconds>', 'time between SIGTERM and SIGKILL when stopping workers', seconds, 5)
    .option(
      '--memory-per-rank <size>',
      "cap each worker's memory (own cgroup), e.g. 2G; reports each rank's peak at exit",
      (value: string) => {
        try {
          return parseMemorySize(value);
        } catch (error) {
          throw new InvalidArgumentError((error as Error).message);
        }
      },
    )
    .option('--socket-ifname <name>', 'interface data sockets bind to (FSDP_SOCKET_IFNAME)')
    .option('--socket-addr <address>', 'address data sockets bind to (FSDP_SOCKET_ADDR)')
    .option('--secure', 'encrypt every data connection of the workers (sets FSDP_SECURE=1)')
    .option('--log-dir <directory>', "where failed workers' logs go (default: the OS temp directory)")
    .argument('<script>', 'a .js/.mjs file (run by node) or .ts file (run through tsx)')
    .argument('[args...]', 'arguments passed to the script')
    .passThroughOptions()
    .exitOverride()
    .configureOutput({ writeErr: (text) => process.stderr.write(text) });
  checkLaunchFlags(argv, program);
  program.parse([...argv], { from: 'user' });
  const options = program.opts<{
    nprocPerNode: number;
    nnodes: { min: number; max: number; elastic: boolean };
    heartbeatTimeout: number;
    restartGrace: number;
    lastCall: number;
    joinTimeout: number;
    nodeRank: number;
    masterAddr: string;
    masterPort: number;
    maxRestarts: number;
    timeout: number;
    gracePeriod: number;
    socketIfname?: string;
    socketAddr?: string;
    memoryPerRank?: number;
    secure?: boolean;
    logDir?: string;
  }>();
  const [script, scriptArguments] = program.processedArgs as [string, string[] | undefined];
  const elastic = options.nnodes.elastic;
  const nnodes = options.nnodes.max;
  if (!elastic && options.nodeRank >= nnodes) {
    throw launchError(
      `--node-rank ${options.nodeRank} is not below --nnodes ${nnodes}.`,
      'number nodes 0 to nnodes-1.',
    );
  }
  if ((elastic || nnodes > 1) && options.masterPort === 0) {
    throw launchError(
      'A multi-node job needs a fixed --master-port (every node must know where the store listens).',
      'pass --master-port, e.g. 29500, identical on every node.',
    );
  }
  return {
    nprocPerNode: options.nprocPerNode,
    nnodes,
    nodeRank: elastic ? 0 : options.nodeRank,
    masterAddr: options.masterAddr,
    masterPort: options.masterPort,
    maxRestarts: options.maxRestarts,
    timeoutSeconds: options.timeout,
    timeoutGiven: program.getOptionValueSource('timeout') === 'cli',
    gracePeriodSeconds: options.gracePeriod,
    memoryPerRankBytes: options.memoryPerRank,
    socketIfname: options.socketIfname ?? env.FSDP_SOCKET_IFNAME,
    socketAddr: options.socketAddr ?? env.FSDP_SOCKET_ADDR,
    secure: options.secure === true,
    ...(options.logDir === undefined ? {} : { logDirectory: options.logDir }),
    script,
    scriptArguments: scriptArguments ?? [],
    ...(elastic
      ? {
          elastic: {
            minNodes: options.nnodes.min,
            maxNodes: nnodes,
            heartbeatTimeoutSeconds: options.heartbeatTimeout,
            restartGraceSeconds: options.restartGrace,
            lastCallSeconds: options.lastCall,
            joinTimeoutSeconds: options.joinTimeout,
          },
        }
      : {}),
  };
}

function numberFrom(value: string | undefined, fallback: number): number {
  return value !== undefined && /^\d+$/.test(value) ? Number(value) : fallback;
}

function launchError(message: string, fix: string): CollectiveError {
  return new CollectiveError(message, { code: 'launch', fix });
}

/**
 * torchrun's flags a user is likely to type, with what fsdp-run calls them (either spelling is the
 * same key, [Note: option keys] in @fsdp-ts/errors); any other unknown flag gets the nearest one.
 */
export const torchrunFlags: ForeignNames = {
  '--nproc_per_node': "torchrun's --nproc_per_node is --nproc-per-node here (a number)",
  '--node_rank': "torchrun's --node_rank is --node-rank here",
  '--master_addr': "torchrun's --master_addr is --master-addr here",
  '--master_port': "torchrun's --master_port is --master-port here",
  '--max_restarts': "torchrun's --max_restarts is --max-restarts here",
  '--rdzv_endpoint': 'pass its host and port as --master-addr HOST --master-port PORT',
  '--rdzv_backend': 'no equivalent: the rendezvous is built in; remove it',
  '--rdzv_id': 'no equivalent: a job is its --master-addr:--master-port and its job secret; remove it',
  '--standalone': 'no such flag: a single-node job is the default; remove it',
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
