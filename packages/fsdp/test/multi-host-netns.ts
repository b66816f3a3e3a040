/**
 * Two test "hosts" as Linux network namespaces joined by a veth pair (iproute2's `ip netns`),
 * each with its own address of a private /30 and no other route: traffic between them crosses
 * a real network hop (veth), and nothing can leave for any other address. Needs root.
 *
 *   ns <stem><pid>-0  veth v<pid>h0  <prefix>.1/30
 *   ns <stem><pid>-1  veth v<pid>h1  <prefix>.2/30
 *
 * With `hostnames`, each host also gets its own UTS namespace (its own `hostname`), kept as a
 * file under /run/fsdp-uts like `ip netns` keeps network namespaces under /run/netns.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface NamespacePair {
  /** Namespace names, host 0 then host 1. */
  readonly namespaces: readonly [string, string];
  /** The address of each host, host 0 then host 1. */
  readonly addresses: readonly [string, string];
  /** The veth end inside each namespace, host 0 then host 1 (what a packet capture listens on). */
  readonly links: readonly [string, string];
  /** Each host's `hostname` when the pair was made with `hostnames`, else undefined. */
  readonly hostnames: readonly [string, string] | undefined;
  /** Process ids running in a namespace now (`ip netns pids`). */
  pids(host: 0 | 1): number[];
  /** SIGKILLs whatever still runs in both namespaces and deletes them (idempotent). */
  remove(): void;
}

export interface NamespacePairOptions {
  /** Namespace name stem; the namespaces are `<stem><pid>-0` and `<stem><pid>-1`. */
  stem: string;
  /** First three octets of the /30 (the network address is `<prefix>.0`), e.g. '10.231.0'. */
  prefix: string;
  /**
   * Give each host its own UTS namespace with this hostname (host 0, host 1); processes started
   * through `enter` see it. Without it both hosts share the machine's hostname, which software
   * that keys shared files on the hostname (Open MPI's shared-memory segments, Slurm's
   * SlurmctldHost check) mistakes for one host.
   */
  hostnames?: readonly [string, string];
}

/** Where the persistent UTS namespaces live (bind mounts of nsfs files, as /run/netns holds). */
const UTS_DIRECTORY = '/run/fsdp-uts';

function ip(args: string[]): string {
  return execFileSync('ip', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

function existingNamespaces(): string[] {
  const listed = spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' });
  return (listed.stdout ?? '')
    .split('\n')
    .map((line) => line.split(' ')[0] ?? '')
    .filter((name) => name !== '');
}

function pidsIn(namespace: string): number[] {
  const listed = spawnSync('ip', ['netns', 'pids', namespace], { encoding: 'utf8' });
  if (listed.status !== 0) return [];
  return listed.stdout
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map(Number);
}

function removeHostname(namespace: string): void {
  const file = join(UTS_DIRECTORY, namespace);
  if (!existsSync(file)) return;
  spawnSync('umount', [file]);
  rmSync(file, { force: true });
}

function killAndDelete(namespace: string): void {
  removeHostname(namespace);
  if (!existingNamespaces().includes(namespace)) return;
  for (const pid of pidsIn(namespace)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  // Deleting the namespace also destroys the veth end inside it (and with it the pair).
  spawnSync('ip', ['netns', 'delete', namespace]);
}

/** Removes the namespaces of `name` (and kills what runs in them). */
export function removeLeftovers(name: string): void {
  for (const host of [0, 1]) killAndDelete(`${name}-${host}`);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * [Note: namespace names] A pair is named `<stem><pid>-<host>` after the process that made it, so
 * two test runs at once (another checkout, CI) do not delete each other's hosts. Pairs whose
 * process no longer runs are leftovers of a crashed run: removed here.
 */
export function removeStaleNamespaces(stem: string): void {
  const pattern = new RegExp(`^${stem}(\\d+)-[01]$`);
  const utsFiles = existsSync(UTS_DIRECTORY) ? readdirSync(UTS_DIRECTORY) : [];
  for (const namespace of new Set([...existingNamespaces(), ...utsFiles])) {
    const match = pattern.exec(namespace);
    if (match !== null && !alive(Number(match[1]))) killAndDelete(namespace);
  }
}

/**
 * Creates the two namespaces (after removing leftovers of crashed runs). Throws, saying the
 * machine forbids it, when `ip netns` does not work here: the tests that need it must fail
 * loudly rather than be skipped.
 */
export function createNamespacePair(options: NamespacePairOptions): NamespacePair {
  const { stem, prefix } = options;
  const name = `${stem}${process.pid}`;
  removeStaleNamespaces(stem);
  const namespaces = [`${name}-0`, `${name}-1`] as const;
  const addresses = [`${prefix}.1`, `${prefix}.2`] as const;
  // Interface names are at most 15 bytes; the pid keeps them apart from a concurrent run's.
  const links = [`v${process.pid}h0`, `v${process.pid}h1`] as const;
  removeLeftovers(name);
  try {
    for (const namespace of namespaces) {
      ip(['netns', 'add', namespace]);
      ip(['-n', namespace, 'link', 'set', 'lo', 'up']);
    }
    ip([
      'link',
      'add',
      links[0],
      'netns',
      namespaces[0],
      'type',
      'veth',
      'peer',
      'name',
      links[1],
      'netns',
      namespaces[1],
    ]);
    for (const host of [0, 1] as const) {
      ip(['-n', namespaces[host], 'addr', 'add', `${addresses[host]}/30`, 'dev', links[host]]);
      ip(['-n', namespaces[host], 'link', 'set', links[host], 'up']);
    }
    if (options.hostnames !== undefined) {
      mkdirSync(UTS_DIRECTORY, { recursive: true });
      for (const host of [0, 1] as const) {
        const file = join(UTS_DIRECTORY, namespaces[host]);
        writeFileSync(file, '');
        // `unshare --uts=FILE` makes the namespace and bind-mounts it on FILE, so it outlives the command.
        execFileSync('unshare', [`--uts=${file}`, 'hostname', options.hostnames[host]], {
          stdio: ['ignore', 'pipe', 'pipe'],
        });
      }
    }
  } catch (cause) {
    removeLeftovers(name);
    const stderr = (cause as { stderr?: string }).stderr?.trim() || String(cause);
    throw new Error(
      `This machine forbids the network namespaces the multi-host test needs (\`ip netns add\` / veth failed: ${stderr}). ` +
        'Run the tests as root on a host (or a privileged container) where iproute2 can create network namespaces; the test is not skipped on purpose.',
    );
  }
  return {
    namespaces,
    addresses,
    links,
    hostnames: options.hostnames,
    pids: (host) => pidsIn(namespaces[host]),
    remove: () => removeLeftovers(name),
  };
}

/** The command line that runs `argv` inside a namespace (`ip netns exec` execs, keeping the pid). */
export function inNamespace(namespace: string, argv: string[]): [string, string[]] {
  return ['ip', ['netns', 'exec', namespace, ...argv]];
}

/**
 * [Note: nsenter, not ip netns exec] The command line that runs `argv` on a host: in its network
 * namespace, and in its UTS namespace when the pair has hostnames. `nsenter` execs `argv` (the
 * pid stays) and changes nothing else; `ip netns exec` also remounts /sys for the namespace,
 * which hides the cgroup file system from what runs inside (slurmd then refuses to start).
 */
export function onHost(pair: NamespacePair, host: 0 | 1, argv: string[]): [string, string[]] {
  const namespace = pair.namespaces[host];
  const uts = pair.hostnames === undefined ? [] : [`--uts=${join(UTS_DIRECTORY, namespace)}`];
  return ['nsenter', [`--net=/run/netns/${namespace}`, ...uts, ...argv]];
}
