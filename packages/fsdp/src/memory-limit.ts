import { existsSync, readFileSync } from 'node:fs';
import { freemem } from 'node:os';
import { join } from 'node:path';

/** How much memory this rank may use, and where that figure came from. */
export interface RankMemoryLimit {
  readonly bytes: number;
  readonly source: string;
}

/**
 * This rank's memory budget: `FSDP_MEMORY_LIMIT_BYTES` (set by `fsdp-run --memory-per-rank`),
 * else the limit of the process's memory cgroup (v1 or v2) when one is set, else the host's free
 * memory divided by the ranks on it (`LOCAL_WORLD_SIZE`, default 1).
 */
export function rankMemoryLimit(env: NodeJS.ProcessEnv = process.env): RankMemoryLimit {
  const given = Number(env.FSDP_MEMORY_LIMIT_BYTES);
  if (Number.isFinite(given) && given > 0) {
    return { bytes: given, source: 'FSDP_MEMORY_LIMIT_BYTES (fsdp-run --memory-per-rank)' };
  }
  const cgroup = cgroupLimit();
  if (cgroup !== undefined) return { bytes: cgroup, source: 'the memory cgroup of this process' };
  const ranksOnHost = Math.max(1, Number(env.LOCAL_WORLD_SIZE) || 1);
  return {
    bytes: Math.floor(freemem() / ranksOnHost),
    source: `free memory of the host / ${ranksOnHost} rank${ranksOnHost === 1 ? '' : 's'}`,
  };
}

/**
 * A cap this rank is killed past, when one is set: `FSDP_MEMORY_LIMIT_BYTES` or the process's
 * memory cgroup. Undefined when the only budget is the host's free memory (nothing kills the rank
 * at that figure, so nothing should be done to stay under it).
 */
export function rankMemoryCap(env: NodeJS.ProcessEnv = process.env): number | undefined {
  const given = Number(env.FSDP_MEMORY_LIMIT_BYTES);
  if (Number.isFinite(given) && given > 0) return given;
  return cgroupLimit();
}

/** The memory cgroup limit of this process, or undefined where none is set (or none is readable). */
function cgroupLimit(): number | undefined {
  try {
    const membership = readFileSync('/proc/self/cgroup', 'utf8').split('\n');
    const v1 = membership.find((line) => /^\d+:([^:]*,)?memory(,[^:]*)?:/.test(line));
    const v2 = membership.find((line) => line.startsWith('0::'));
    const file =
      v1 !== undefined
        ? join('/sys/fs/cgroup/memory', v1.slice(v1.lastIndexOf(':') + 1), 'memory.limit_in_bytes')
        : v2 !== undefined
          ? join('/sys/fs/cgroup', v2.slice(3), 'memory.max')
          : undefined;
    if (file === undefined || !existsSync(file)) return undefined;
    const limit = Number(readFileSync(file, 'utf8').trim()); // 'max' (v2 unlimited) is NaN
    // v1 reports "unlimited" as a huge page-rounded number near 2^63.
    return Number.isFinite(limit) && limit < 2 ** 60 ? limit : undefined;
  } catch {
    return undefined;
  }
}
