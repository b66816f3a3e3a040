import { existsSync } from 'node:fs';
import { allocateShared } from '../allocate-shared.js';
import type { ProcessGroup } from '../process-group.js';

/**
 * [Note: pre-restart signal] When a launcher joins an elastic job whose round has room, fsdp-run
 * asks the running workers to stop at a step boundary so the script can checkpoint first. It does
 * two things, at once, on every host: creates the file named by FSDP_RESTART_FILE (so a training
 * loop that never yields to the event loop, e.g. one of synchronous `work.wait()`s, still sees
 * it) and sends RESTART_SIGNAL (SIGUSR2) to each worker (fsdp-run's preload turns it into a
 * flag, so it never kills a worker). The workers then have --restart-grace seconds (default 30)
 * to exit (any code) before SIGTERM, then SIGKILL after --grace-period.
 */
export const RESTART_SIGNAL: NodeJS.Signals = 'SIGUSR2';

/** The global flag fsdp-run's preload sets on RESTART_SIGNAL (a Symbol.for key, shared by copies). */
export const RESTART_FLAG = Symbol.for('fsdp-ts.restart-requested');

/** Whether fsdp-run asked this process to stop for a restart (no communication). */
export function restartRequestedLocally(env: NodeJS.ProcessEnv = process.env): boolean {
  if ((globalThis as Record<symbol, unknown>)[RESTART_FLAG] === true) return true;
  const file = env.FSDP_RESTART_FILE;
  return file !== undefined && file !== '' && existsSync(file);
}

/**
 * Whether fsdp-run asked the job to stop for a restart, agreed by every rank of `group`: a
 * 4-byte all-reduce (max) of each rank's local answer, so all ranks see the same value at the
 * same step even though the request reaches them at different moments. A collective: call it on
 * every rank at the same point of each step, then checkpoint and exit when it returns true:
 *
 *   if (restartRequested(group)) { saveCheckpoint(dir, { model, optimizer, step }); break; }
 */
export function restartRequested(group: ProcessGroup): boolean {
  const flag = allocateShared(Int32Array, 1);
  flag[0] = restartRequestedLocally() ? 1 : 0;
  group.allReduce(flag, { op: 'max', dtype: 'int32' }).wait();
  return flag[0] === 1;
}
