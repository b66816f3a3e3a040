/**
 * packages/fsdp/bench/job-cpu.ts against a real process: one that burns a known CPU time in a
 * network namespace of its own (unshare --net, root only), counted through the namespace as
 * bench/cluster counts its hosts' processes.
 */
import { spawn, spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { JobCpu, kernelOutsideJobMs } from '../../packages/fsdp/bench/job-cpu';

const canUnshare =
  process.platform === 'linux' &&
  process.getuid?.() === 0 &&
  spawnSync('unshare', ['--net', 'true']).status === 0;

/**
 * The child: a worker thread and the main thread each spin (~0.3 s of work) after "go" on stdin, then it
 * prints its own CPU time over the spin (getrusage: every thread), the reference the counters
 * must agree with.
 */
const child = `
  const { Worker } = require('node:worker_threads');
  const spin = 'let x = 0; for (let i = 0; i < 3e8; i++) x = (x + i) % 1000003; globalThis.x = x';
  const worker = new Worker(
    'require("node:worker_threads").parentPort.once("message", () => { ' + spin + '; process.exit(0); })',
    { eval: true },
  );
  worker.once('online', () => process.stdout.write('ready\\n'));
  process.stdin.once('data', () => {
    const start = process.cpuUsage();
    worker.postMessage(0);
    eval(spin);
    worker.once('exit', () => {
      const used = process.cpuUsage(start);
      process.stdout.write(JSON.stringify({ ms: (used.user + used.system) / 1000 }) + '\\n');
      setTimeout(() => {}, 5000);
    });
  });`;

describe('JobCpu', () => {
  it.runIf(canUnshare)(
    'counts every thread of the processes in the job’s namespaces, and the busy process apart',
    async () => {
      const job = spawn('unshare', ['--net', process.execPath, '-e', child], {
        stdio: ['pipe', 'pipe', 'inherit'],
      });
      const busy = spawn(process.execPath, ['-e', 'for (;;) {}'], {
        stdio: 'ignore',
      });
      const lines: string[] = [];
      const line = () =>
        new Promise<string>((resolve) => {
          const take = () => (lines.length > 0 ? resolve(lines.shift()!) : job.stdout.once('data', take));
          take();
        });
      job.stdout.setEncoding('utf8');
      job.stdout.on('data', (text: string) => lines.push(...text.trim().split('\n')));
      try {
        expect(await line()).toBe('ready');
        const counter = new JobCpu({ namespaces: [`/proc/${job.pid}/ns/net`], busyPid: busy.pid! });
        counter.begin();
        job.stdin.write('go\n');
        const reference = (JSON.parse(await line()) as { ms: number }).ms;
        const sample = counter.end();
        expect(reference).toBeGreaterThan(200); // both threads spun
        // One process, counted in 10 ms ticks at each end (and the few ms after its report).
        expect(Object.keys(sample.byKind)).toEqual(['rank']);
        expect(Math.abs(sample.jobMs - reference)).toBeLessThan(40);
        expect(sample.busyMs).toBeGreaterThan(0);
        expect(sample.machine.busyMs).toBeGreaterThanOrEqual(sample.jobMs + sample.busyMs - 60);
        expect(kernelOutsideJobMs(sample)).toBeGreaterThanOrEqual(0);
      } finally {
        job.kill('SIGKILL');
        busy.kill('SIGKILL');
      }
    },
    30_000,
  );
});

describe('kernelOutsideJobMs', () => {
  it('is ksoftirqd plus the machine’s softirq, at most what no tracked process used', () => {
    const sample = (machineBusy: number, softirq: number) => ({
      jobMs: 500,
      byKind: { rank: 500 },
      ksoftirqdMs: 10,
      busyMs: 200,
      machine: { busyMs: machineBusy, softirqMs: softirq, idleMs: 0 },
    });
    expect(kernelOutsideJobMs(sample(800, 40))).toBe(50); // 90 unattributed, 40 of it softirq
    expect(kernelOutsideJobMs(sample(730, 40))).toBe(30); // only 20 unattributed
    expect(kernelOutsideJobMs(sample(600, 40))).toBe(10); // the ticks' coarseness: never below ksoftirqd
  });
});
