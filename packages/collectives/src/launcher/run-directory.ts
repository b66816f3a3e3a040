import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CollectiveError } from '../errors.js';
import { readFailureRecord } from './failure-record.js';
import { buildFailureReport } from './failure-report.js';
import type { WorkerExit } from './worker-process.js';

/**
 * [Note: run directory] Each fsdp-run keeps its workers' failure records and logs ([Note: failure
 * records]) in one directory of its own, `fsdp-run-XXXXXX` under --log-dir (default: the OS temp
 * directory, $TMPDIR or /tmp), one subdirectory per attempt (`attempt-0`, …) or elastic round
 * (`round-0`, …), two files per crashed rank: `rank-R.log` (the full text) and `rank-R.error.json`
 * (the record). A run in which no worker crashed leaves nothing behind: the directory is removed
 * when fsdp-run ends; otherwise it stays, and the report names its files.
 */
export class RunDirectory {
  private path: string | undefined;

  constructor(private readonly parent: string | undefined) {}

  /** Creates (once) the run directory and the subdirectory `label` of one attempt or round. */
  attempt(label: string): AttemptDirectory {
    this.path ??= createRunDirectory(this.parent);
    const directory = join(this.path, label);
    mkdirSync(directory, { recursive: true });
    return new AttemptDirectory(directory);
  }

  /** Removes the run directory when no worker wrote anything into it. Never throws. */
  close(): void {
    if (this.path === undefined) return;
    try {
      const written = readdirSync(this.path, { withFileTypes: true }).some(
        (entry) => !entry.isDirectory() || readdirSync(join(this.path!, entry.name)).length > 0,
      );
      if (!written) rmSync(this.path, { recursive: true, force: true });
    } catch {
      // Already gone, or not ours to read: leave it.
    }
  }
}

/** One attempt's (or round's) directory of failure records. */
export class AttemptDirectory {
  constructor(readonly path: string) {}

  /** The environment that tells the worker of `rank` where to write its record and log. */
  environmentOf(rank: number): { FSDP_ERROR_FILE: string; FSDP_ERROR_LOG: string } {
    return {
      FSDP_ERROR_FILE: join(this.path, `rank-${rank}.error.json`),
      FSDP_ERROR_LOG: join(this.path, `rank-${rank}.log`),
    };
  }

  /**
   * The report of this attempt's failures ([Note: one report per job]), from its workers' exits;
   * `debug`: the workers had FSDP_DEBUG=1 (their stacks are on stderr already).
   */
  report(exits: readonly WorkerExit[], debug: boolean): string[] {
    return buildFailureReport(
      exits.map((exit) => ({
        exit,
        record:
          exit.code === 0 ? undefined : readFailureRecord(this.environmentOf(exit.rank).FSDP_ERROR_FILE),
      })),
      { debug },
    );
  }
}

/** `fsdp-run-XXXXXX` under `parent` (created if missing) or the OS temp directory. */
function createRunDirectory(parent: string | undefined): string {
  try {
    if (parent !== undefined) mkdirSync(parent, { recursive: true });
    return mkdtempSync(join(parent ?? tmpdir(), 'fsdp-run-'));
  } catch (cause) {
    throw new CollectiveError(`fsdp-run cannot create its run directory under ${parent ?? tmpdir()}.`, {
      code: 'launch',
      cause,
      fix: 'pass --log-dir with a directory fsdp-run may write to (or set TMPDIR).',
    });
  }
}
