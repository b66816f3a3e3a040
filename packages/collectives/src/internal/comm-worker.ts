/**
 * Entry of the communication worker thread: one per ProcessGroup per rank. It runs the group's
 * ops strictly in the order the main thread issued them, writes each outcome into the op's
 * status word ([Note: status word]) and never lets an exception escape, so a waiting main thread
 * always wakes up.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { findBackend } from './backend-registry.js';
import type { Engine, EngineInit, EngineModule } from './engine/engine-base.js';
import type { MainToWorkerMessage, OpMessage } from './op-message.js';
import { SharedBufferRelease } from './shared-buffer-release.js';
import { DEPARTED, markFailed, markSucceeded } from './status-word.js';

const port = parentPort!;
const init = workerData as EngineInit;
const queue: OpMessage[] = [];
let running = false;
let current: OpMessage | undefined;
let destroying = false;
/** [Note: process exit] */
let departing = false;
let engine: Engine;
const release = new SharedBufferRelease();

async function createEngine(): Promise<Engine> {
  const module: EngineModule =
    init.engineModule === undefined
      ? await findBackend(init.backend).loadEngine!()
      : ((await import(init.engineModule)) as EngineModule);
  return module.createEngine(init, { notify: (message) => port.postMessage(message) });
}

async function drain(): Promise<void> {
  if (running) return;
  running = true;
  while (queue.length > 0) {
    release.collectIfDue();
    const op = queue.shift()!;
    current = op;
    try {
      await engine.run(op);
      markSucceeded(op.status);
    } catch (error) {
      markFailed(op.status, error);
    }
    current = undefined;
    release.ran(op);
  }
  // [Note: the communication worker returns shared buffers]
  release.collectIfDue();
  running = false;
  if (destroying) await shutDown();
  else if (departing) await depart();
}

async function shutDown(): Promise<void> {
  try {
    // An idle group's destroy says goodbye first ([Note: clean departure]).
    if (queue.length === 0 && current === undefined) await engine.depart?.();
    await engine.close();
  } finally {
    port.postMessage({ type: 'destroyed' });
    port.close();
  }
}

async function depart(): Promise<void> {
  try {
    if (engine !== undefined) await engine.depart?.();
  } catch {
    // The process is ending: a goodbye that cannot be written leaves peers to see a loss.
  } finally {
    if (init.departure !== undefined) {
      Atomics.store(init.departure, 0, DEPARTED);
      Atomics.notify(init.departure, 0);
    }
  }
}

const ready = createEngine().then(
  (created) => {
    engine = created;
  },
  (error: unknown) => port.postMessage({ type: 'init-failed', message: String(error) }),
);

port.on('message', (message: MainToWorkerMessage) => {
  void ready.then(() => {
    if (message.type === 'op') {
      queue.push(message);
      void drain();
    } else if (message.type === 'destroy') {
      destroying = true;
      if (running) void engine.close();
      else void shutDown();
    } else if (message.type === 'depart') {
      departing = true;
      if (!running) void depart();
    } else if (message.type === 'abort') engine.abort(message.message);
    else engine.control?.(message);
  });
});

process.on('uncaughtException', (error) => {
  if (current !== undefined) markFailed(current.status, error);
  for (const op of queue.splice(0)) markFailed(op.status, error);
  port.postMessage({ type: 'init-failed', message: String(error) });
});
