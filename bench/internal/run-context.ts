/**
 * The context every benchmark records beside its rows: the machine (CPU model, cores, memory,
 * Node), the load average when the run started and when it ended, the commit measured (and
 * whether the work tree had uncommitted changes to tracked files), and the date. One helper, imported by every
 * benchmark, so `npm run bench:report` reads the same fields from each JSON.
 *
 *   const benchmarkRun = startRun();          // before the first measurement
 *   ... measure ...
 *   writeFileSync(file, JSON.stringify({ context: benchmarkRun.finish(), rows }));
 */
import { execFileSync } from 'node:child_process';
import os from 'node:os';
import { fileURLToPath } from 'node:url';

export interface RunContext {
  /** ISO date when the run started. */
  date: string;
  /** `git rev-parse HEAD` of the measured tree, or 'unknown' outside a git checkout. */
  commit: string;
  /** Tracked files differed from the commit while measuring. */
  uncommittedChanges: boolean;
  machine: { cpu: string; cores: number; memoryGiB: number; node: string; platform: string };
  /** os.loadavg() (1, 5, 15 minutes) at the start and at the end of the run. */
  loadAverage: { before: number[]; after: number[] };
}

const repositoryRoot = fileURLToPath(new URL('../../', import.meta.url));

function git(...args: string[]): string | undefined {
  try {
    return execFileSync('git', args, {
      cwd: repositoryRoot,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
  } catch {
    return undefined;
  }
}

const rounded = (values: number[]) => values.map((value) => Number(value.toFixed(2)));

/** Call before measuring; `finish()` after, to get the context to write beside the rows. */
export function startRun(): { finish(): RunContext } {
  const date = new Date().toISOString();
  const before = rounded(os.loadavg());
  return {
    finish: () => ({
      date,
      commit: git('rev-parse', 'HEAD') ?? 'unknown',
      uncommittedChanges: (git('status', '--porcelain', '--untracked-files=no') ?? '') !== '',
      machine: {
        cpu: os.cpus()[0]?.model.trim() ?? 'unknown',
        cores: os.cpus().length,
        memoryGiB: Number((os.totalmem() / 2 ** 30).toFixed(1)),
        node: process.version,
        platform: `${os.platform()} ${os.release()}`,
      },
      loadAverage: { before, after: rounded(os.loadavg()) },
    }),
  };
}
