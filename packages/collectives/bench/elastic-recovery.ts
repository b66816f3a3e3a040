/**
 * `npm run bench:elastic -w @fsdp-ts/collectives`: how fast an elastic job notices a lost host
 * and runs again. Two fsdp-run launchers on loopback (`--nnodes 1:2`, 2 workers each running
 * steps of a tcp group, bench/elastic-step-worker.ts: a 1 MiB all-reduce and 50 ms per step;
 * default --heartbeat-timeout 10 and --last-call 1); SIGKILL of the second launcher once every
 * worker of the 2-host round has stepped; measured from the kill to (a) the host's
 * `lost launcher` line (detection), (b) the first worker of the next round printing (restart)
 * and (c) the survivors' first completed step at the new world size. Repeated --runs times
 * (default 5); median, min and max, with the load average. Target (issue 17): detection <=
 * heartbeat timeout + 1 s.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';

const argv = process.argv.slice(2);
const runs = Number(argv[argv.indexOf('--runs') + 1] ?? 5) || 5;
const heartbeatSeconds = Number(argv[argv.indexOf('--heartbeat-timeout') + 1] ?? 10) || 10;
const launcher = fileURLToPath(new URL('../src/bin/fsdp-run.ts', import.meta.url));
const worker = fileURLToPath(new URL('./elastic-step-worker.ts', import.meta.url));
const secret = randomBytes(32).toString('hex');

interface Started {
  child: ChildProcess;
  output: () => string;
  when(pattern: RegExp): Promise<number>;
}

function start(port: number): Started {
  const args = ['--conditions=@fsdp-ts/source', '--import', 'tsx', launcher, '--nnodes', '1:2'];
  args.push('--nproc-per-node', '2', '--master-port', String(port), '--grace-period', '1');
  args.push('--heartbeat-timeout', String(heartbeatSeconds), worker);
  const child = spawn(process.execPath, args, {
    env: { ...process.env, FSDP_JOB_SECRET: secret },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const waiters: { pattern: RegExp; resolve: (at: number) => void }[] = [];
  const onData = (chunk: Buffer) => {
    output += chunk.toString();
    for (const waiter of [...waiters]) {
      if (waiter.pattern.test(output)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve(performance.now());
      }
    }
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  return {
    child,
    output: () => output,
    when: (pattern) =>
      new Promise((resolve, reject) => {
        if (pattern.test(output)) resolve(performance.now());
        else waiters.push({ pattern, resolve });
        setTimeout(() => reject(new Error(`no ${pattern} within 120 s:\n${output}`)), 120_000).unref();
        child.once('close', (code, signal) => {
          if (!pattern.test(output))
            reject(new Error(`fsdp-run exited (${code ?? signal}) before printing ${pattern}:\n${output}`));
        });
      }),
  };
}

const exited = (child: ChildProcess) =>
  child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve()
    : new Promise<void>((resolve) => child.once('close', () => resolve()));

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const load = () =>
  `load average ${loadavg()
    .map((value) => value.toFixed(2))
    .join(' ')}`;

const detections: number[] = [];
const restarts: number[] = [];
const firstSteps: number[] = [];
for (let run = 0; run < runs; run++) {
  const port = 29_700 + run;
  const host = start(port);
  await host.when(/hosting the rendezvous/);
  const other = start(port);
  await host.when(/first step round 1 rank 1\n/);
  await other.when(/first step round 1 rank 3\n/);
  const killedAt = performance.now();
  other.child.kill('SIGKILL');
  const [detected, restarted, stepped] = await Promise.all([
    host.when(/lost launcher node 1/),
    host.when(/worker 1\/2 round 2 local 1/),
    host.when(/first step round 2 rank 0\n/),
  ]);
  detections.push(detected - killedAt);
  restarts.push(restarted - killedAt);
  firstSteps.push(stepped - killedAt);
  host.child.kill('SIGTERM');
  await Promise.all([exited(host.child), exited(other.child)]);
  console.log(
    `run ${run}: detection ${(detections.at(-1)! / 1000).toFixed(2)} s, restart ${(restarts.at(-1)! / 1000).toFixed(2)} s, first new step ${(firstSteps.at(-1)! / 1000).toFixed(2)} s (${load()})`,
  );
}
const summary = (values: number[]) =>
  `median ${(median(values) / 1000).toFixed(2)} s, min ${(Math.min(...values) / 1000).toFixed(2)}, max ${(Math.max(...values) / 1000).toFixed(2)}`;
console.log(`heartbeat timeout ${heartbeatSeconds} s, ${runs} runs, ${load()}`);
console.log(`kill -> lost launcher logged: ${summary(detections)}`);
console.log(`kill -> first worker of the next round running: ${summary(restarts)}`);
console.log(`kill -> survivors' first step at the new world size: ${summary(firstSteps)}`);
const met = median(detections) <= (heartbeatSeconds + 1) * 1000;
console.log(`target detection <= heartbeat timeout + 1 s: ${met ? 'met' : 'NOT met'}`);
