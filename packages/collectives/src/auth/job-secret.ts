import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { CollectiveError } from '../errors.js';

/** Shortest accepted job secret, in characters (the launcher generates 64 hex characters). */
export const MINIMUM_JOB_SECRET_LENGTH = 16;

/** A fresh random job secret: 32 random bytes as 64 hex characters. */
export function generateJobSecret(): string {
  return randomBytes(32).toString('hex');
}

/** Throws a CollectiveError (code 'auth') unless `secret` is long enough to be a job secret. */
export function validateJobSecret(secret: string, source: string): string {
  if (secret.length < MINIMUM_JOB_SECRET_LENGTH) {
    throw new CollectiveError(
      `The job secret from ${source} has ${secret.length} characters; expected at least ${MINIMUM_JOB_SECRET_LENGTH}.`,
      {
        code: 'auth',
        expected: `>= ${MINIMUM_JOB_SECRET_LENGTH} characters`,
        actual: secret.length,
        fix: 'generate one with `openssl rand -hex 32` and pass it to every host (see "Security model" in the README).',
      },
    );
  }
  return secret;
}

/**
 * The job secret from the environment: `FSDP_JOB_SECRET` (the secret itself) or
 * `FSDP_JOB_SECRET_FILE` (a file holding it; one trailing newline is ignored, as written by
 * `echo` or mounted from a Kubernetes Secret). Returns undefined when neither is set; throws a
 * CollectiveError when both are set, the file cannot be read, or the secret is too short.
 */
export function resolveJobSecret(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const direct = env.FSDP_JOB_SECRET;
  const file = env.FSDP_JOB_SECRET_FILE;
  if (direct !== undefined && direct !== '' && file !== undefined && file !== '') {
    throw new CollectiveError(
      'Both FSDP_JOB_SECRET and FSDP_JOB_SECRET_FILE are set; expected exactly one.',
      {
        code: 'auth',
        fix: 'unset one of them (fsdp-run passes FSDP_JOB_SECRET to its workers itself).',
      },
    );
  }
  if (direct !== undefined && direct !== '') return validateJobSecret(direct, 'FSDP_JOB_SECRET');
  if (file === undefined || file === '') return undefined;
  let content: string;
  try {
    content = readFileSync(file, 'utf8');
  } catch (cause) {
    throw new CollectiveError(`Cannot read the job secret file FSDP_JOB_SECRET_FILE=${file}.`, {
      code: 'auth',
      cause,
      fix: 'point FSDP_JOB_SECRET_FILE at a readable file that holds the secret on one line.',
    });
  }
  return validateJobSecret(content.replace(/\r?\n$/, ''), `FSDP_JOB_SECRET_FILE=${file}`);
}

/** resolveJobSecret, or a CollectiveError (code 'auth') saying that `who` needs one shared by every host. */
export function requireJobSecret(env: NodeJS.ProcessEnv, who: string): string {
  const secret = resolveJobSecret(env);
  if (secret !== undefined) return secret;
  throw new CollectiveError(`${who} needs a job secret shared by every host.`, {
    code: 'auth',
    fix: 'set FSDP_JOB_SECRET (e.g. `export FSDP_JOB_SECRET=$(openssl rand -hex 32)` before srun) or FSDP_JOB_SECRET_FILE on every host.',
  });
}
