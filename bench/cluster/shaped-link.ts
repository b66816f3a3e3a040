/**
 * The emulated cluster's hardware: two network-namespace hosts joined by a veth pair whose two
 * ends are shaped with `tc ... tbf` (rate only: this kernel family's tbf and htb shape rate, and
 * netem, which would add delay, is often missing), processes launched on a host, the link's byte
 * counters, its raw TCP rate (raw-probe.ts), and the busy process of the contention cases.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createNamespacePair, type NamespacePair } from '../../packages/fsdp/test/multi-host-netns';

export type Host = 0 | 1;

export interface Launch {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** bits per second of a tc rate such as '200mbit', '1gbit', '10gbit'. */
export function bitsPerSecond(rate: string): number {
  const match = /^(\d+(?:\.\d+)?)(k|m|g)bit$/.exec(rate);
  if (match === null)
    throw new Error(`a link rate is a tc rate such as 200mbit, 1gbit or 10gbit; got ${JSON.stringify(rate)}`);
  return Number(match[1]) * { k: 1e3, m: 1e6, g: 1e9 }[match[2] as 'k' | 'm' | 'g'];
}

/** Why this machine cannot emulate the cluster (root, iproute2's ip netns and tc, tbf), or undefined. */
export function linkUnavailableReason(): string | undefined {
  if (process.getuid?.() !== 0)
    return 'needs root: it creates network namespaces and shapes their link with tc (run it with sudo, or as root in a privileged container)';
  for (const tool of ['ip', 'tc'])
    if (spawnSync(tool, ['-V']).error !== undefined)
      return `\`${tool}\` is missing: apt-get install iproute2`;
  const netns = spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' });
  if (netns.status !== 0)
    return `\`ip netns\` does not work here (${(netns.stderr || 'no output').trim()}): the kernel or container forbids network namespaces`;
  return undefined;
}

export class ShapedLink {
  readonly pair: NamespacePair;
  #port = 29700;

  constructor() {
    this.pair = createNamespacePair({ stem: 'fsdp-clb', prefix: '10.231.3' });
  }

  /** A free port number for the next launch (the namespaces are new: nothing else listens). */
  nextPort(): number {
    return this.#port++;
  }

  /** The command line that runs `argv` on a host. */
  onHost(host: Host, argv: string[]): [string, string[]] {
    return ['ip', ['netns', 'exec', this.pair.namespaces[host], ...argv]];
  }

  /** The file counting the bytes a host sent, as seen from inside its namespace (`ip netns exec` mounts its /sys). */
  transmitCounter(host: Host): string {
    return `/sys/class/net/${this.pair.links[host]}/statistics/tx_bytes`;
  }

  /** Shapes both ends of the veth to `rate` (tbf), replacing the last shaping. */
  shape(rate: string): void {
    // tbf drops a packet larger than its bucket: 10 ms of traffic, and never less than 128 KiB
    // (a 64 KiB GSO segment, twice).
    const burst = Math.max(128 * 1024, Math.round(bitsPerSecond(rate) / 8 / 100));
    for (const host of [0, 1] as const) {
      const [command, args] = this.onHost(host, [
        ...['tc', 'qdisc', 'replace', 'dev', this.pair.links[host], 'root', 'tbf'],
        ...['rate', rate, 'burst', String(burst), 'latency', '100ms'],
      ]);
      try {
        execFileSync(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
      } catch (cause) {
        throw new Error(
          `tc could not shape the veth with tbf at ${rate} (${String((cause as { stderr?: Buffer }).stderr ?? cause).trim()}): the kernel needs the sch_tbf module (modprobe sch_tbf)`,
        );
      }
    }
  }

  launch(host: Host, argv: string[], env: NodeJS.ProcessEnv = {}): Promise<Launch> {
    const [command, args] = this.onHost(host, argv);
    const child = spawn(command, args, {
      env: { ...process.env, OPENBLAS_NUM_THREADS: '1', OMP_NUM_THREADS: '1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const limit = setTimeout(() => child.kill('SIGKILL'), 900_000);
    return new Promise((resolve) =>
      child.on('close', (code) => {
        clearTimeout(limit);
        resolve({ code, stdout, stderr });
      }),
    );
  }

  /** Waits for a launch on each host; when one fails, ends what still runs on both (its peer would wait). */
  async both(launches: [Promise<Launch>, Promise<Launch>], what: string): Promise<Launch[]> {
    const stopPeers = (result: Launch) => {
      if (result.code !== 0)
        for (const host of [0, 1] as const)
          for (const pid of this.pair.pids(host))
            try {
              process.kill(pid, 'SIGKILL');
            } catch {
              // already gone
            }
      return result;
    };
    const done = await Promise.all(launches.map((item) => item.then(stopPeers)));
    if (done.some((item) => item.code !== 0))
      throw new Error(
        `${what} failed:\n${done.map((item) => `${item.stdout}\n${item.stderr}`).join('\n---\n')}`,
      );
    return done;
  }

  /**
   * The shaped link's raw TCP rate per direction with both directions busy at once (as a ring
   * uses it), in bytes per second: about 1.5 s of traffic at the shaped rate.
   */
  async probe(rate: string): Promise<number> {
    const bytes = Math.round(Math.min(bitsPerSecond(rate) / 8, 1e9) * 1.5);
    const port = String(this.nextPort());
    const node = [process.execPath, '--import', 'tsx', rawProbe];
    const server = this.launch(1, [...node, 'serve', this.pair.addresses[1], port, String(bytes)]);
    const client = this.launch(0, [...node, 'connect', this.pair.addresses[1], port, String(bytes)]);
    const done = await this.both([client, server], 'raw-socket probe');
    const rates = done.map(
      (item) =>
        (JSON.parse(item.stdout.trim().split('\n').at(-1)!) as { bytesPerSecond: number }).bytesPerSecond,
    );
    return Math.min(...rates);
  }

  /**
   * One process spinning on a core beside the job, as another user's job would: the same for
   * every row of a case (both hosts share the machine's cores, so one process loads both).
   */
  startBusyProcess(): ChildProcess {
    const [command, args] = this.onHost(0, [process.execPath, '-e', 'for (;;) {}']);
    return spawn(command, args, { stdio: 'ignore' });
  }

  remove(): void {
    this.pair.remove();
  }
}

const rawProbe = fileURLToPath(new URL('./raw-probe.ts', import.meta.url));
