import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CollectiveError } from '../errors.js';

/**
 * [Note: per-rank memory caps] `fsdp-run --memory-per-rank 2G` gives every worker its own
 * memory cgroup with that limit, the way a device limits what one rank may hold. The worker is
 * started as `sh -c 'echo $$ > <cgroup>/cgroup.procs; exec node …'`, so it is inside its cgroup
 * before it allocates anything (a process moved in later would keep its earlier charges outside
 * the limit under cgroup v1). The kernel's OOM killer then SIGKILLs a worker that goes past its
 * cap; the launcher reads the cgroup's own OOM counter to tell that apart from any other
 * SIGKILL, and reads its peak usage when the worker exits.
 *
 * cgroup v1 (a `memory` hierarchy mounted on its own) is used when mounted, v2 (the unified
 * hierarchy with the memory controller) otherwise. The cgroups are created below the launcher's
 * own, so a launcher that itself runs under a limit (a Slurm job, a container) keeps it.
 */

const CGROUP_ROOT = '/sys/fs/cgroup';

/** '2G', '512M', '1.5GiB', '1073741824' → bytes (powers of 1024, as `free -h` and Slurm's --mem). */
export function parseMemorySize(text: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$/i.exec(text);
  const unit = match?.[2]?.toLowerCase() ?? '';
  const scale = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4 }[unit];
  const bytes = match === null || scale === undefined ? Number.NaN : Math.floor(Number(match[1]) * scale);
  if (!Number.isFinite(bytes) || bytes < 16 * 1024 ** 2) {
    throw new CollectiveError(`--memory-per-rank expected a size of at least 16M, got '${text}'.`, {
      code: 'launch',
      fix: "give a number with a unit, e.g. '--memory-per-rank 2G' or '--memory-per-rank 512M'.",
    });
  }
  return bytes;
}

/** '2.00 GiB' */
export function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(unit === 0 ? 0 : 2)} ${units[unit]}`;
}

type CgroupVersion = 1 | 2;

/** Where this process's memory cgroup is, and which version of the interface it speaks. */
function ownMemoryCgroup(): { version: CgroupVersion; path: string } {
  const membership = readFileSync('/proc/self/cgroup', 'utf8').split('\n');
  const v1 = membership.find((line) => /^\d+:([^:]*,)?memory(,[^:]*)?:/.test(line));
  if (v1 !== undefined && existsSync(join(CGROUP_ROOT, 'memory', 'cgroup.procs'))) {
    return { version: 1, path: join(CGROUP_ROOT, 'memory', v1.slice(v1.lastIndexOf(':') + 1)) };
  }
  const v2 = membership.find((line) => line.startsWith('0::'));
  const controllers = join(CGROUP_ROOT, 'cgroup.controllers');
  if (v2 !== undefined && existsSync(controllers) && readFileSync(controllers, 'utf8').includes('memory')) {
    return { version: 2, path: join(CGROUP_ROOT, v2.slice(3)) };
  }
  throw capError('no cgroup memory controller is mounted on this machine (neither v1 nor v2)');
}

function capError(why: string, cause?: unknown): CollectiveError {
  return new CollectiveError(`--memory-per-rank cannot cap the workers: ${why}.`, {
    code: 'launch',
    fix: 'run fsdp-run as root (or with write access to the memory cgroup of its own process, e.g. a delegated systemd scope), or leave out --memory-per-rank.',
    ...(cause === undefined ? {} : { cause }),
  });
}

/** One worker's memory cgroup. Owned by the launcher: created before the worker, removed after. */
export class MemoryCgroup {
  private constructor(
    readonly path: string,
    readonly version: CgroupVersion,
    readonly limitBytes: number,
  ) {}

  /** Creates `<own cgroup>/<name>` with `limitBytes`; a CollectiveError says why it cannot. */
  static create(name: string, limitBytes: number): MemoryCgroup {
    const own = ownMemoryCgroup();
    const path = join(own.path, name);
    try {
      if (own.version === 2) enableMemoryController(own.path);
      if (!existsSync(path)) mkdirSync(path);
      if (own.version === 1) {
        writeFileSync(join(path, 'memory.limit_in_bytes'), String(limitBytes));
        // Without swap accounting memsw does not exist; where it does, swap counts too.
        const swapLimit = join(path, 'memory.memsw.limit_in_bytes');
        if (existsSync(swapLimit)) writeFileSync(swapLimit, String(limitBytes));
      } else {
        writeFileSync(join(path, 'memory.max'), String(limitBytes));
        if (existsSync(join(path, 'memory.swap.max'))) writeFileSync(join(path, 'memory.swap.max'), '0');
      }
    } catch (error) {
      throw capError(`creating ${path} failed (${(error as Error).message})`, error);
    }
    return new MemoryCgroup(path, own.version, limitBytes);
  }

  /**
   * `node nodeArguments…` wrapped so the process joins this cgroup before it starts: the
   * command and arguments to spawn. The shell replaces itself with node (exec), so the pid,
   * signals and exit status are node's.
   */
  wrap(command: string, commandArguments: readonly string[]): { command: string; arguments: string[] } {
    return {
      command: '/bin/sh',
      arguments: [
        '-c',
        'echo $$ > "$1" || exit 125; shift; exec "$@"',
        'fsdp-run-memory-cap',
        join(this.path, 'cgroup.procs'),
        command,
        ...commandArguments,
      ],
    };
  }

  /** Highest usage the cgroup has seen, in bytes (undefined where the kernel does not say). */
  peakBytes(): number | undefined {
    const file = join(this.path, this.version === 1 ? 'memory.max_usage_in_bytes' : 'memory.peak');
    try {
      return Number(readFileSync(file, 'utf8').trim());
    } catch {
      return undefined;
    }
  }

  /** How many processes the kernel's OOM killer has killed in this cgroup. */
  outOfMemoryKills(): number {
    const file = join(this.path, this.version === 1 ? 'memory.oom_control' : 'memory.events');
    try {
      const match = /^oom_kill (\d+)$/m.exec(readFileSync(file, 'utf8'));
      return match === null ? 0 : Number(match[1]);
    } catch {
      return 0;
    }
  }

  /**
   * Removes the cgroup once it is empty. Right after the worker's exit, a leftover process of its
   * group may still be dying (EBUSY): then it tries again a few times, 100 ms apart.
   */
  remove(attemptsLeft = 20): void {
    try {
      rmdirSync(this.path);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EBUSY' || attemptsLeft === 0) return;
      setTimeout(() => this.remove(attemptsLeft - 1), 100).unref();
    }
  }
}

/**
 * With --memory-per-rank (`limit` defined): a fresh cgroup for each of `ranks`, named
 * `<label>-rank-<rank>`, all made before any worker starts so a failure leaves no worker behind.
 * Without it, no caps (an empty list).
 */
export function createMemoryCaps(
  limit: number | undefined,
  ranks: readonly number[],
  label: string,
): MemoryCgroup[] {
  const caps: MemoryCgroup[] = [];
  try {
    for (const rank of ranks)
      if (limit !== undefined) caps.push(MemoryCgroup.create(`${label}-rank-${rank}`, limit));
  } catch (error) {
    for (const cap of caps) cap.remove();
    throw error;
  }
  return caps;
}

/** v2: a child cgroup gets a memory controller only if its parent delegates it. */
function enableMemoryController(parent: string): void {
  const subtree = join(parent, 'cgroup.subtree_control');
  if (!readFileSync(subtree, 'utf8').includes('memory')) writeFileSync(subtree, '+memory');
}
