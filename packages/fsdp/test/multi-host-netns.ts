/**
 * Two test "hosts" as Linux network namespaces joined by a veth pair (iproute2's `ip netns`),
 * each with its own address of a private /30 and no other route: traffic between them crosses
 * a real network hop (veth), and nothing can leave for any other address. Needs root.
 *
 *   ns <name>-0  veth <link>0  <prefix>.1/30
 *   ns <name>-1  veth <link>1  <prefix>.2/30
 */
import { execFileSync, spawnSync } from 'node:child_process';

export interface NamespacePair {
  /** Namespace names, host 0 then host 1. */
  readonly namespaces: readonly [string, string];
  /** The address of each host, host 0 then host 1. */
  readonly addresses: readonly [string, string];
  /** Process ids running in a namespace now (`ip netns pids`). */
  pids(host: 0 | 1): number[];
  /** SIGKILLs whatever still runs in both namespaces and deletes them (idempotent). */
  remove(): void;
}

export interface NamespacePairOptions {
  /** Namespace name stem; the namespaces are `<name>-0` and `<name>-1`. */
  name: string;
  /** First three octets of the /30 (the network address is `<prefix>.0`), e.g. '10.231.0'. */
  prefix: string;
}

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

function killAndDelete(namespace: string): void {
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

/** Removes the namespaces of `name` left over by a previous run that crashed. */
export function removeLeftovers(name: string): void {
  for (const host of [0, 1]) killAndDelete(`${name}-${host}`);
}

/**
 * Creates the two namespaces (after removing leftovers of the same name). Throws, saying the
 * machine forbids it, when `ip netns` does not work here: the tests that need it must fail
 * loudly rather than be skipped.
 */
export function createNamespacePair(options: NamespacePairOptions): NamespacePair {
  const { name, prefix } = options;
  const namespaces = [`${name}-0`, `${name}-1`] as const;
  const addresses = [`${prefix}.1`, `${prefix}.2`] as const;
  // Interface names are at most 15 bytes.
  const links = [`${name.slice(0, 12)}v0`, `${name.slice(0, 12)}v1`] as const;
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
    pids: (host) => pidsIn(namespaces[host]),
    remove: () => removeLeftovers(name),
  };
}

/** The command line that runs `argv` inside a namespace (`ip netns exec` execs, keeping the pid). */
export function inNamespace(namespace: string, argv: string[]): [string, string[]] {
  return ['ip', ['netns', 'exec', namespace, ...argv]];
}
