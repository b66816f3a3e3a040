import { MessageChannel, Worker } from 'node:worker_threads';
import { allocateShared, type ProcessGroup } from '../src/index.js';
import { median } from './internal/median.js';

/** Microseconds per round trip or op: median, min and max over the timed batches. */
export interface LatencyFigure {
  median: number;
  best: number;
  worst: number;
}

export interface SmallOpRow {
  /** 'barrier', 'allReduce 1 float32 (wait)', 'allReduce 1 float32 (await)'. */
  name: string;
  latency: LatencyFigure;
  /**
   * CPU microseconds per op of this rank's process over the timed batches (every thread: the
   * main thread and the communication worker; for shm thread ranks, both ranks and their
   * workers, which share the process).
   */
  cpuPerOp: number;
}

function processCpuMicroseconds(): number {
  const usage = process.cpuUsage();
  return usage.user + usage.system;
}

const BATCHES = 9;

function figure(values: number[]): LatencyFigure {
  const sorted = [...values].sort((a, b) => a - b);
  return {
    median: median(sorted),
    best: sorted[0]!,
    worst: sorted[sorted.length - 1]!,
  };
}

/**
 * Per-op latency of the smallest ops, on every rank (rank 0's rows are reported): `opsPerBatch`
 * back-to-back ops per batch, the batch time divided by its op count, 9 batches after a warm-up.
 */
export async function measureSmallOps(group: ProcessGroup, opsPerBatch: number): Promise<SmallOpRow[]> {
  const buffer = allocateShared(Float32Array, 1);
  const cases: [string, () => void | Promise<void>][] = [
    ['barrier', () => group.barrier().wait()],
    ['allReduce 1 float32 (wait)', () => group.allReduce(buffer).wait()],
    ['allReduce 1 float32 (await)', async () => await group.allReduce(buffer)],
  ];
  const rows: SmallOpRow[] = [];
  for (const [name, issue] of cases) {
    const perOp: number[] = [];
    let cpu = 0;
    for (let batch = 0; batch < BATCHES + 1; batch++) {
      group.barrier().wait();
      const cpuStart = processCpuMicroseconds();
      const start = performance.now();
      for (let index = 0; index < opsPerBatch; index++) await issue();
      if (batch > 0) {
        perOp.push(((performance.now() - start) * 1000) / opsPerBatch);
        cpu += processCpuMicroseconds() - cpuStart;
      }
    }
    rows.push({ name, latency: figure(perOp), cpuPerOp: cpu / (BATCHES * opsPerBatch) });
  }
  return rows;
}

/** A thread that answers each ping: Atomics on a shared word, or a MessagePort message. */
const PONG_SOURCE = `
const { workerData, parentPort } = require('node:worker_threads');
const { word, port, rounds } = workerData;
if (word) {
  for (let round = 1; round <= rounds; round++) {
    while (Atomics.load(word, 0) !== 2 * round - 1) Atomics.wait(word, 0, 2 * round - 2);
    Atomics.store(word, 0, 2 * round);
    Atomics.notify(word, 0);
  }
  parentPort.postMessage('done');
} else {
  port.on('message', (value) => { port.postMessage(value); if (value === rounds) port.close(); });
}
`;

/**
 * The raw peers of the small-op latency, measured in the same run: a round trip between this
 * thread and another one through Atomics.wait / Atomics.notify on a shared word (what any wake-up
 * between two threads costs), and through a MessagePort (postMessage, answered from the other
 * thread's event loop). Microseconds per round trip.
 */
export async function measureRawPeers(
  opsPerBatch: number,
): Promise<{ atomics: LatencyFigure; messagePort: LatencyFigure }> {
  const rounds = (BATCHES + 1) * opsPerBatch;
  const word = new Int32Array(new SharedArrayBuffer(4));
  const atomicsWorker = new Worker(PONG_SOURCE, { eval: true, workerData: { word, rounds } });
  await new Promise((resolve) => atomicsWorker.once('online', resolve));
  const atomics: number[] = [];
  let round = 0;
  for (let batch = 0; batch < BATCHES + 1; batch++) {
    const start = performance.now();
    for (let index = 0; index < opsPerBatch; index++) {
      round++;
      Atomics.store(word, 0, 2 * round - 1);
      Atomics.notify(word, 0);
      while (Atomics.load(word, 0) !== 2 * round) Atomics.wait(word, 0, 2 * round - 1);
    }
    if (batch > 0) atomics.push(((performance.now() - start) * 1000) / opsPerBatch);
  }
  await atomicsWorker.terminate();

  const channel = new MessageChannel();
  const portWorker = new Worker(PONG_SOURCE, {
    eval: true,
    workerData: { port: channel.port2, rounds },
    transferList: [channel.port2],
  });
  await new Promise((resolve) => portWorker.once('online', resolve));
  const port = channel.port1;
  const messagePort: number[] = [];
  let sent = 0;
  for (let batch = 0; batch < BATCHES + 1; batch++) {
    const start = performance.now();
    for (let index = 0; index < opsPerBatch; index++) {
      sent++;
      await new Promise((resolve) => {
        port.once('message', resolve);
        port.postMessage(sent);
      });
    }
    if (batch > 0) messagePort.push(((performance.now() - start) * 1000) / opsPerBatch);
  }
  port.close();
  await portWorker.terminate();
  return { atomics: figure(atomics), messagePort: figure(messagePort) };
}
