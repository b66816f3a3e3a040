import { readFileSync } from 'node:fs';

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
