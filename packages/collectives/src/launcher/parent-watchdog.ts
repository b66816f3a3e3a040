import { FAILURE_RECORDER_MODULE } from './failure-recorder-module.js';

/**
 * [Note: orphan prevention] SIGKILL of fsdp-run cannot be caught, so each worker watches its
 * parent itself. fsdp-run starts every worker with `--import <PARENT_WATCHDOG_IMPORT>`, a module
 * that (when FSDP_LAUNCHER_PID is set) starts an unref'd worker thread polling `process.ppid`
 * every 200 ms. When the parent changes (fsdp-run died and the worker was re-parented), the
 * thread sends SIGTERM to its process and SIGKILL 5 s later. A thread, not a timer on the main
 * event loop, so it fires even while the main thread is blocked in a synchronous `work.wait()`.
 * fsdp-run also starts each worker in its own process group and signals the whole group, so
 * processes a worker spawns are stopped with it.
 */
const WATCHDOG_THREAD = `
const { workerData } = require('node:worker_threads');
const timer = setInterval(() => {
  if (process.ppid === workerData.parent) return;
  clearInterval(timer);
  try { process.kill(workerData.pid, 'SIGTERM'); } catch {}
  setTimeout(() => { try { process.kill(workerData.pid, 'SIGKILL'); } catch {} }, 5000);
}, 200);
`;

const WATCHDOG_MODULE = `
import { Worker } from 'node:worker_threads';
const parent = Number(process.env.FSDP_LAUNCHER_PID);
if (parent > 0) {
  // [Note: pre-restart signal] fsdp-run's request to checkpoint and exit becomes a flag, never a kill.
  process.on('SIGUSR2', () => { globalThis[Symbol.for('fsdp-ts.restart-requested')] = true; });
  new Worker(${JSON.stringify(WATCHDOG_THREAD)}, { eval: true, workerData: { parent, pid: process.pid } }).unref();
}
`;

/**
 * A `data:` URL for `node --import`, so no file needs to exist next to the worker script: the
 * worker's preamble, the watchdog and the failure recorder ([Note: failure records]).
 */
export const PARENT_WATCHDOG_IMPORT = `data:text/javascript,${encodeURIComponent(WATCHDOG_MODULE + FAILURE_RECORDER_MODULE)}`;
