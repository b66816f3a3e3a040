import { existsSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { basename, join } from 'node:path';
import { CheckpointError } from '../errors';
import { LATEST_FILE, METADATA_FILE, stepDirectoryName } from './checkpoint-format';
import { fsyncDirectory, replaceFileAtomically } from './durable-files';
import { hasMetadataDigest, verifyMetadataDigest } from './metadata-digest';

const STEP_PATTERN = /^step-(\d{8,})$/;
/** A step directory moved aside by a re-save of the same step (see commitStepDirectory). */
const ASIDE_PATTERN = /^\.old-step-(\d{8,})-\d+$/;

/** A complete checkpoint found under a root directory. */
export interface CheckpointEntry {
  step: number;
  path: string;
}

/** Complete checkpoints (step directories holding metadata.json) under `root`, oldest first. */
export function listCheckpoints(root: string): CheckpointEntry[] {
  if (!existsSync(root)) return [];
  const entries: CheckpointEntry[] = [];
  for (const name of readdirSync(root)) {
    const match = STEP_PATTERN.exec(name);
    if (match === null) continue;
    const path = join(root, name);
    if (existsSync(join(path, METADATA_FILE))) entries.push({ step: Number(match[1]), path });
  }
  return entries.sort((left, right) => left.step - right.step);
}

/** Receives the line logged when a damaged `latest` makes a resume use another checkpoint. */
export type CheckpointLog = (line: string) => void;

/**
 * [Note: which checkpoint a root resumes from]
 * One rule, used by findLatestCheckpoint(root) and loadCheckpoint(root):
 * 1. `latest` names an intact step directory (metadata.json present and matching its digest):
 *    that one.
 * 2. `latest` exists but is damaged (not a step name, or it names a directory that is missing or
 *    whose metadata.json is missing or fails its digest): the newest intact step directory, and
 *    one line is logged that names the damaged step and the one used; if there is none, a
 *    CheckpointError('missing') (never null: something was saved, so starting over would be wrong).
 * 3. No `latest`: the newest intact step directory (a crash between the rename and the pointer
 *    update leaves a complete newer step), or null when nothing was saved.
 * "Step directories" include, for a step whose `step-N` is missing, its `.old-step-N-<nonce>`
 * copy: a re-save of step N moves the old directory aside before renaming the new one into place,
 * and a crash between those two renames leaves only the aside copy (rule 2 then loads it).
 * Damage inside data files is not looked for here: loading finds it and fails, naming the file.
 */
export function findLatestCheckpoint(root: string, log: CheckpointLog = defaultLog): string | null {
  const pointer = join(root, LATEST_FILE);
  if (!existsSync(pointer)) return newestIntact(root);
  const name = readFileSync(pointer, 'utf8').trim();
  const named = join(root, name);
  const problem = STEP_PATTERN.test(name) ? checkpointProblem(named) : `it is not a step directory name`;
  if (problem === null) return named;
  const fallback = newestIntact(root);
  if (fallback === null) {
    throw new CheckpointError(
      `${pointer} names '${name}', which is damaged (${problem}), and ${root} holds no other intact checkpoint.`,
      {
        reason: 'missing',
        file: pointer,
        fix: 'restore the checkpoint from a copy, or delete the root to start over.',
      },
    );
  }
  log(
    `fsdp: ${pointer} names '${name}', which is damaged (${problem}); resuming from ${basename(fallback)} instead, the newest intact checkpoint.`,
  );
  return fallback;
}

/** Why `directory` is not an intact checkpoint, or null when it is one. */
export function checkpointProblem(directory: string): string | null {
  if (!existsSync(directory)) return 'the directory is missing';
  const file = join(directory, METADATA_FILE);
  if (!existsSync(file)) return `${METADATA_FILE} is missing`;
  const bytes = readFileSync(file);
  if (hasMetadataDigest(bytes)) {
    try {
      verifyMetadataDigest(file, bytes);
    } catch {
      return `${METADATA_FILE} fails its SHA-256 check`;
    }
  }
  return null;
}

function newestIntact(root: string): string | null {
  const entries = [...listCheckpoints(root), ...asideCopies(root)].sort(
    (left, right) => left.step - right.step,
  );
  for (let index = entries.length - 1; index >= 0; index--) {
    if (checkpointProblem(entries[index]!.path) === null) return entries[index]!.path;
  }
  return null;
}

/** `.old-step-N-*` directories whose step has no `step-N` directory (a re-save that crashed mid-commit). */
function asideCopies(root: string): CheckpointEntry[] {
  if (!existsSync(root)) return [];
  const names = readdirSync(root);
  const entries: CheckpointEntry[] = [];
  for (const name of names) {
    const match = ASIDE_PATTERN.exec(name);
    if (match === null || names.includes(stepDirectoryName(Number(match[1])))) continue;
    entries.push({ step: Number(match[1]), path: join(root, name) });
  }
  return entries;
}

function defaultLog(line: string): void {
  console.warn(line);
}

/** Points `latest` at the step directory (atomic replace). */
export function writeLatestPointer(root: string, step: number): void {
  replaceFileAtomically(join(root, LATEST_FILE), `${stepDirectoryName(step)}\n`);
}

/**
 * Moves the finished temporary directory into place as the step directory. An existing directory
 * of the same step (a re-save after a restart) is moved aside first and removed afterwards.
 */
export function commitStepDirectory(root: string, temporary: string, step: number, nonce: number): string {
  const final = join(root, stepDirectoryName(step));
  let aside: string | null = null;
  if (existsSync(final)) {
    aside = join(root, `.old-${stepDirectoryName(step)}-${nonce}`);
    renameSync(final, aside);
  }
  renameSync(temporary, final);
  fsyncDirectory(root);
  if (aside !== null) rmSync(aside, { recursive: true, force: true });
  return final;
}

/** Keeps the newest `keep` checkpoints (never the one just written) and removes leftovers of crashed saves. */
export function pruneCheckpoints(root: string, keep: number | undefined, current: string): void {
  for (const name of readdirSync(root)) {
    if (name.startsWith('.tmp-step-') || name.startsWith('.old-step-')) {
      rmSync(join(root, name), { recursive: true, force: true });
    }
  }
  if (keep === undefined) return;
  const entries = listCheckpoints(root);
  const excess = entries.slice(0, Math.max(0, entries.length - keep));
  for (const entry of excess) {
    if (entry.path !== current) rmSync(entry.path, { recursive: true, force: true });
  }
  fsyncDirectory(root);
}
