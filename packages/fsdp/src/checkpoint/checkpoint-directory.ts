import { existsSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { LATEST_FILE, METADATA_FILE, stepDirectoryName } from './checkpoint-format';
import { fsyncDirectory, replaceFileAtomically } from './durable-files';

const STEP_PATTERN = /^step-(\d{8,})$/;

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

/**
 * The checkpoint to resume from under `root`: the one `latest` names when it is complete, else the
 * newest complete step directory, else null (nothing saved yet).
 */
export function findLatestCheckpoint(root: string): string | null {
  const pointer = join(root, LATEST_FILE);
  if (existsSync(pointer)) {
    const name = readFileSync(pointer, 'utf8').trim();
    if (STEP_PATTERN.test(name) && existsSync(join(root, name, METADATA_FILE))) return join(root, name);
  }
  return listCheckpoints(root).at(-1)?.path ?? null;
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
