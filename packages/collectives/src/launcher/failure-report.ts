import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CollectiveError } from '../errors.js';
import { describeEnding, type WorkerExit } from './worker-process.js';

/** How one worker of a failed attempt (or round) ended, with its failure record if it wrote one. */
export interface RankOutcome {
  exit: WorkerExit;
  record: FailureRecord | undefined;
}

/** Log files named in full per failure; beyond this many, the rest by count and directory. */
const LISTED_LOGS = 3;

/** One distinct failure (ranks whose `sameFailureKey` agrees, or who ended alike without a record). */
interface Failure {
  ranks: number[];
  records: { rank: number; record: FailureRecord }[];
  /** A worker that ended non-zero without a record: how it ended. */
  ending?: string;
  /** A rank of another node, known here only through its consequences. */
  remote?: boolean;
  /** Ranks that failed because of this one, with the error they show. */
  consequences: { rank: number; record: FailureRecord }[];
}

/**
 * [Note: one report per job] The lines fsdp-run prints for a failed attempt, instead of every
 * rank's dump of the same error: each distinct failure once, as
 *   failure on ranks 0-1: <name> (code <code>): <message>
 *     Fix: <the error's fix, or for an error that is not fsdp-ts's, the user's frame to fix>
 *     ranks … failed as a consequence (<name> <code> naming rank N)
 *     stacks: <log files> (FSDP_DEBUG=1 prints them here)
 * Two ranks fail "the same" when name, code, message and fix agree once each rank's mention of
 * itself ("rank 3") is set aside. A rank fails "as a consequence" of rank P when its error (or a
 * cause) is a peer's abort (CollectiveError 'aborted' naming P), a step failure naming P
 * (FsdpError 'step-failed' with rank P), or a lost connection to P (CollectiveError 'peer-lost')
 * where P failed on its own; such a rank is listed under P's failure, not as a failure of its
 * own (when P is another node's rank, under a short entry for P: that node's fsdp-run reports
 * P's error). A worker that ended non-zero without a record (process.exit(3), a signal, the OOM killer)
 * is a failure of its own, unless fsdp-run itself stopped it after the first failure: those are
 * listed in one last line (and alone they make no report). Workers that exited 0 are not mentioned.
 */
export function buildFailureReport(outcomes: readonly RankOutcome[], { debug = false } = {}): string[] {
  const stacksHint = debug ? '(also printed above: FSDP_DEBUG=1)' : '(FSDP_DEBUG=1 prints them here)';
  const failed = outcomes.filter(({ exit }) => exit.code !== 0);
  const onTheirOwn = new Set(
    failed
      .filter(({ exit, record }) => record !== undefined || exit.stopped !== true)
      .map(({ exit }) => exit.rank),
  );
  const records = new Map(
    failed.flatMap(({ exit, record }) => (record === undefined ? [] : [[exit.rank, record] as const])),
  );
  const local = new Set(outcomes.map(({ exit }) => exit.rank));
  const originOf = (rank: number): number => {
    let current = rank;
    for (let step = 0; step < records.size; step++) {
      const record = records.get(current);
      const next = record === undefined ? undefined : consequenceOrigin(record.error, current, onTheirOwn);
      if (next === undefined) return current;
      if (!local.has(next)) return next;
      if (!onTheirOwn.has(next)) return current;
      current = next;
      if (current === rank) return rank;
    }
    return current;
  };
  const failures = new Map<string, Failure>();
  const ownerOf = new Map<number, Failure>();
  const addFailure = (exit: WorkerExit, record: FailureRecord | undefined) => {
    const key =
      record === undefined ? `ending:${describeEnding(exit)}` : sameFailureKey(record.error, exit.rank);
    let failure = failures.get(key);
    if (failure === undefined) {
      failure = { ranks: [], records: [], consequences: [] };
      if (record === undefined) failure.ending = describeEnding(exit);
      failures.set(key, failure);
    }
    failure.ranks.push(exit.rank);
    if (record !== undefined) failure.records.push({ rank: exit.rank, record });
    ownerOf.set(exit.rank, failure);
  };
  const stopped: number[] = [];
  const consequences: { exit: WorkerExit; origin: number; record: FailureRecord }[] = [];
  for (const { exit, record } of failed) {
    const origin = originOf(exit.rank);
    if (record === undefined && exit.stopped === true) stopped.push(exit.rank);
    else if (record !== undefined && origin !== exit.rank) consequences.push({ exit, origin, record });
    else addFailure(exit, record);
  }
  for (const { exit, origin, record } of consequences) {
    let owner = ownerOf.get(origin);
    if (owner === undefined && !local.has(origin)) {
      owner = { ranks: [origin], records: [], consequences: [], remote: true };
      failures.set(`remote:${origin}`, owner);
      ownerOf.set(origin, owner);
    }
    if (owner === undefined) addFailure(exit, record);
    else owner.consequences.push({ rank: exit.rank, record });
  }
  // Workers fsdp-run stopped are no failure of their own (e.g. a round stopped for a lost host).
  if (failures.size === 0) return [];
  const lines = [...failures.values()].flatMap((failure) => describeFailure(failure, stacksHint));
  if (stopped.length > 0) lines.push(`stopped by fsdp-run after the failure: ${rankList(stopped)}.`);
  return lines;
}

/** The rank whose failure `error` (on `rank`) follows from, if it is a consequence of another's. */
function consequenceOrigin(error: DescribedError, rank: number, onTheirOwn: Set<number>): number | undefined {
  for (const link of causeChain(error)) {
    if (link.name === 'CollectiveError' && link.code === 'aborted' && link.peer !== undefined) {
      if (link.peer !== rank) return link.peer;
    }
    if (link.name === 'FsdpError' && link.code === 'step-failed' && link.rank !== undefined) {
      return link.rank === rank ? undefined : link.rank;
    }
    if (link.name === 'CollectiveError' && link.code === 'peer-lost' && link.peer !== undefined) {
      if (link.peer !== rank && onTheirOwn.has(link.peer)) return link.peer;
    }
  }
  return undefined;
}

function selfMention(rank: number): RegExp {
  return new RegExp(`\\brank ${rank}(?!\\d)`, 'g');
}

/** name, code, message and fix, with the rank's mentions of itself replaced ("rank 3" → "rank ·"). */
function sameFailureKey(error: DescribedError, rank: number): string {
  const plain = (text: string | undefined) => (text ?? '').replace(selfMention(rank), 'rank ·');
  return JSON.stringify([error.name, error.code ?? '', plain(error.message), plain(error.fix)]);
}

function describeFailure(failure: Failure, stacksHint: string): string[] {
  const who = rankList(failure.ranks);
  if (failure.remote === true) {
    const seen = failure.consequences[0]!.record.error;
    const code = seen.code === undefined ? '' : ` (code ${seen.code})`;
    return [
      `failure on ${who}, of another node (its fsdp-run reports the error):`,
      `  seen here as: ${seen.name}${code}: ${seen.message}`,
      `  ${consequenceLine(failure)}`,
      `  stacks: ${listLogs(failure.consequences.map(({ record }) => record.log))} ${stacksHint}`,
    ];
  }
  if (failure.ending !== undefined) {
    const lines = [
      `failure on ${who}: ${failure.ending}, without an uncaught error (its output above says why).`,
    ];
    if (failure.consequences.length > 0) lines.push(`  ${consequenceLine(failure)}`);
    const logs = failure.consequences.map(({ record }) => record.log);
    if (logs.length > 0) lines.push(`  stacks: ${listLogs(logs)} ${stacksHint}`);
    return lines;
  }
  const first = failure.records[0]!;
  const error = first.record.error;
  // Identical text on every rank: as it is; text that differs only in each rank's own number: "each rank".
  const texts = failure.records.map(({ rank, record }) => ({ rank, error: record.error }));
  const identical = texts.every(
    ({ error: other }) => other.message === error.message && other.fix === error.fix,
  );
  const shown = (text: string) =>
    identical || failure.ranks.length === 1 ? text : text.replace(selfMention(first.rank), 'each rank');
  const code = error.code === undefined ? '' : ` (code ${error.code})`;
  const lines = [`failure on ${who}: ${error.name}${code}: ${shown(error.message)}`];
  const root = causeChain(error).at(-1)!;
  const userFrame = root.project ? undefined : topUserFrame(root.stack);
  if (error.fix !== undefined) {
    lines.push(`  Fix: ${shown(error.fix)}`);
  } else if (!error.project) {
    lines.push(`  Fix: ${codeFix(userFrame)}`);
  }
  if (error.project && !root.project) {
    lines.push(
      `  thrown at: ${userFrame ?? 'no frame in your code (see the stack)'} (${root.name}: ${root.message})`,
    );
  }
  const cause = error.cause;
  if (cause !== undefined && !error.message.includes(cause.message)) {
    const causeCode = cause.code === undefined ? '' : ` (code ${cause.code})`;
    lines.push(`  cause: ${cause.name}${causeCode}: ${cause.message}`);
  }
  if (failure.consequences.length > 0) lines.push(`  ${consequenceLine(failure)}`);
  const logs = [...failure.records, ...failure.consequences].map(({ record }) => record.log);
  lines.push(`  stacks: ${listLogs(logs)} ${stacksHint}`);
  return lines;
}

/**
 * The advice for an error that is not fsdp-ts's (a TypeError, say): a bug in the program, which
 * running the same code again (a restart from a checkpoint included) repeats, so it names the
 * code to change and nothing else.
 */
function codeFix(userFrame: string | undefined): string {
  const where =
    userFrame === undefined
      ? 'the code that threw it (no frame of its stack is in your code: see the stack)'
      : `the code at ${userFrame} (the top frame of its stack in your code)`;
  return `an error of the program itself: fix ${where}, then start the job again.`;
}

function consequenceLine(failure: Failure): string {
  const ranks = failure.consequences.map(({ rank }) => rank);
  const seen = new Set(
    failure.consequences.map(({ record }) => {
      const code = record.error.code === undefined ? '' : ` ${record.error.code}`;
      return `${record.error.name}${code}`;
    }),
  );
  const origin = rankList(failure.ranks);
  return `${rankList(ranks)} failed as a consequence (${[...seen].join(', ')} naming ${origin})`;
}

/** The first few log files by full path, the rest by count and directory. */
function listLogs(logs: readonly string[]): string {
  const listed = logs.slice(0, LISTED_LOGS).join(', ');
  const rest = logs.length - LISTED_LOGS;
  if (rest <= 0) return listed;
  return `${listed} and ${rest} more (${basename(logs[LISTED_LOGS]!).replace(/\d+/, 'N')}) in ${dirname(logs[0]!)}`;
}

/** 'rank 1', 'ranks 0-1', 'ranks 0, 2-4'. */
export function rankList(ranks: readonly number[]): string {
  const sorted = [...new Set(ranks)].sort((a, b) => a - b);
  const spans: string[] = [];
  for (let start = 0; start < sorted.length; ) {
    let end = start;
    while (end + 1 < sorted.length && sorted[end + 1] === sorted[end]! + 1) end++;
    spans.push(start === end ? `${sorted[start]}` : `${sorted[start]}-${sorted[end]}`);
    start = end + 1;
  }
  return `${sorted.length === 1 ? 'rank' : 'ranks'} ${spans.join(', ')}`;
}

/** How launcher logs and errors name a node's consecutive ranks: `rank 2`, or `ranks 2-3`. */
export function describeRanks(first: number, count: number): string {
  return count === 1 ? `rank ${first}` : `ranks ${first}-${first + count - 1}`;
}

/** `at fn (file:line:column)` or `at file:line:column`; the file may be a file:// URL. */
const FRAME = /^\s*at (?:.*? \()?(.+?):(\d+):(\d+)\)?\s*$/;

/** The fsdp-ts packages (not the examples): their src/ and dist/ files are library frames. */
const LIBRARY_PACKAGE = /^(fsdp-ts|@fsdp-ts\/(?!example-).+)$/;

/**
 * The top frame of `stack` in the user's code, as `file:line:column`: the first frame that is not
 * Node's own (`node:`), not a dependency (`node_modules`) and not in the src/ or dist/ of an
 * fsdp-ts package (a test fixture of this repository is user code). Undefined when none is.
 */
export function topUserFrame(stack: string | undefined): string | undefined {
  if (stack === undefined) return undefined;
  const packages = new Map<string, string | undefined>();
  for (const line of stack.split('\n')) {
    const match = FRAME.exec(line);
    if (match === null) continue;
    const file = match[1]!.startsWith('file://') ? safeFilePath(match[1]!) : match[1]!;
    if (file === undefined || !file.startsWith('/') || file.includes(`${sep}node_modules${sep}`)) continue;
    if (isLibraryFile(file, packages)) continue;
    return `${file}:${match[2]}:${match[3]}`;
  }
  return undefined;
}

function safeFilePath(url: string): string | undefined {
  try {
    return fileURLToPath(url);
  } catch {
    return undefined;
  }
}

function isLibraryFile(file: string, packages: Map<string, string | undefined>): boolean {
  const root = packageRootOf(dirname(file), packages);
  if (root === undefined) return false;
  const name = packages.get(root);
  if (name === undefined || !LIBRARY_PACKAGE.test(name)) return false;
  const inside = relative(root, file);
  return inside.startsWith(`src${sep}`) || inside.startsWith(`dist${sep}`);
}

/** The nearest directory at or above `directory` with a package.json; its name goes into `names`. */
function packageRootOf(directory: string, names: Map<string, string | undefined>): string | undefined {
  for (let current = directory; ; current = dirname(current)) {
    if (names.has(current)) return current;
    try {
      const { name } = JSON.parse(readFileSync(join(current, 'package.json'), 'utf8')) as { name?: unknown };
      names.set(current, typeof name === 'string' ? name : undefined);
      return current;
    } catch {
      // No (readable) package.json here: look further up.
    }
    if (dirname(current) === current) return undefined;
  }
}

/** One error of a worker's crash as its failure record states it ([Note: failure records]). */
export interface DescribedError {
  /** The error's name (`NnError`, `TypeError`), or `thrown <type>` for a thrown non-object. */
  name: string;
  /** The message without the " Fix: …" that fsdp-ts errors append. */
  message: string;
  /** Whether it is an fsdp-ts error (it carries the `Symbol.for('fsdp-ts.error')` marker). */
  project: boolean;
  fix?: string;
  code?: string;
  /** CollectiveError: the reporting rank; FsdpError 'step-failed': the rank whose failure it was. */
  rank?: number;
  /** CollectiveError: the peer it names (for 'aborted', the rank that aborted). */
  peer?: number;
  stack?: string;
  cause?: DescribedError;
}

/** What a worker writes to FSDP_ERROR_FILE when it crashes. */
export interface FailureRecord {
  version: 1;
  rank: number;
  /** 'uncaughtException' or 'unhandledRejection'. */
  origin: string;
  /** The log file with the full text (stacks, causes): FSDP_ERROR_LOG. */
  log: string;
  error: DescribedError;
}

/** The record at `path`, or undefined when there is none (the worker did not crash) or it is unreadable. */
export function readFailureRecord(path: string): FailureRecord | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null) return undefined;
  const record = parsed as Partial<FailureRecord>;
  if (record.version !== 1 || typeof record.log !== 'string' || !isDescribedError(record.error))
    return undefined;
  return record as FailureRecord;
}

function isDescribedError(value: unknown): value is DescribedError {
  if (typeof value !== 'object' || value === null) return false;
  const error = value as Partial<DescribedError>;
  return (
    typeof error.name === 'string' &&
    typeof error.message === 'string' &&
    (error.cause === undefined || isDescribedError(error.cause))
  );
}

/** `error` and its causes, outermost first. */
export function causeChain(error: DescribedError): DescribedError[] {
  const chain: DescribedError[] = [];
  for (let link: DescribedError | undefined = error; link !== undefined; link = link.cause) chain.push(link);
  return chain;
}

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
