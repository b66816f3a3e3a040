/**
 * `mpirun` across the two network-namespace hosts of `multi-host-netns.ts` (a pair made with
 * hostnames): mpirun runs on host 0 and starts host 1's Open MPI daemon through a launch agent
 * (Open MPI's `plm_rsh_agent`, ssh on a real cluster) that enters host 1's namespaces instead of
 * logging in. Open MPI's own TCP transport then carries the ranks' traffic over the veth link,
 * and its shared-memory transport only between ranks of one host (each host has its own hostname).
 */
import { spawn } from 'node:child_process';
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { MPIRUN_FLAGS } from '../../../collectives/test/helpers/run-with-mpirun';
import { type NamespacePair, onHost } from '../multi-host-netns';
import { type WatchedLaunch, watchLaunch } from './watched-launch';

export interface MpirunOptions {
  /** Where the launch agent script is written. */
  directory: string;
  ranksPerHost: number;
  /** The program and its arguments, as each rank runs it. */
  argv: string[];
  /** The ranks' environment (mpirun passes its own on; host 1's daemon inherits it through the agent). */
  env: NodeJS.ProcessEnv;
  /** mpirun is SIGKILLed after this long. */
  limitMs: number;
}

/**
 * The launch agent: Open MPI calls it as `agent <host> <command words...>`, like ssh, and it runs
 * the command in that host's namespaces (see [Note: nsenter, not ip netns exec]).
 */
export function writeLaunchAgent(pair: NamespacePair, directory: string): string {
  const hostnames = pair.hostnames;
  if (hostnames === undefined)
    throw new Error('mpirun across namespace hosts needs a pair made with hostnames');
  const cases = ([0, 1] as const)
    .map((host) => {
      const [command, args] = onHost(pair, host, []);
      return `  ${hostnames[host]}) exec ${command} ${args.join(' ')} /bin/sh -c "$*" ;;`;
    })
    .join('\n');
  const agent = join(directory, 'namespace-agent.sh');
  writeFileSync(
    agent,
    `#!/bin/sh\n# plm_rsh_agent of the multi-host mpirun test: ssh <host> <command>, by nsenter.\nhost=$1; shift\ncase "$host" in\n${cases}\n  *) echo "namespace-agent: no host $host" >&2; exit 1 ;;\nesac\n`,
  );
  chmodSync(agent, 0o755);
  return agent;
}

/** Starts `mpirun -np 2N` on host 0 with N ranks on each host; `--tag-output` prefixes each line `[job,rank]`. */
export function mpirunOnHosts(pair: NamespacePair, options: MpirunOptions): WatchedLaunch {
  const agent = writeLaunchAgent(pair, options.directory);
  const hostnames = pair.hostnames!;
  const { ranksPerHost } = options;
  const [command, args] = onHost(pair, 0, [
    'mpirun',
    // The flags of the collectives package's mpirun tests: root allowed, no binding.
    ...MPIRUN_FLAGS,
    '--mca',
    'plm_rsh_agent',
    agent,
    '--host',
    hostnames.map((name) => `${name}:${ranksPerHost}`).join(','),
    '-np',
    String(2 * ranksPerHost),
    '--tag-output',
    ...options.argv,
  ]);
  const child = spawn(command, args, { env: options.env, stdio: ['ignore', 'pipe', 'pipe'] });
  return watchLaunch(child, options.limitMs, { name: 'mpirun', match: 'output' });
}
