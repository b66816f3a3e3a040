/**
 * `npm run bench:store -w @fsdp-ts/collectives`: the rendezvous Store's cost on loopback, one
 * server and one client in this process (what the store link's security scheme costs):
 *   connect   connect + handshake, 20 connections
 *   add       sequential `add` round trips, --ops of them (default 2000)
 *   pipelined --ops small `set`s issued at once (requests per second)
 *   bulk      `set` of 1 MiB values, 32 of them, sequential (MB/s of payload)
 * Prints median, min and max of --runs repetitions (default 5) with the load average, as JSON.
 */
import { randomBytes } from 'node:crypto';
import { loadavg } from 'node:os';
import { connectStore } from '../src/store/store-client.js';
import { startStoreServer } from '../src/store/store-server.js';

const argv = process.argv.slice(2);
const option = (name: string, fallback: number) => {
  const at = argv.indexOf(name);
  return at >= 0 ? Number(argv[at + 1]) || fallback : fallback;
};
const runs = option('--runs', 5);
const ops = option('--ops', 2000);
const secret = randomBytes(32).toString('hex');

function summary(values: number[]): { median: number; min: number; max: number } {
  const sorted = [...values].sort((a, b) => a - b);
  const round = (value: number) => Math.round(value * 1000) / 1000;
  return {
    median: round(sorted[Math.floor(sorted.length / 2)]!),
    min: round(sorted[0]!),
    max: round(sorted.at(-1)!),
  };
}

const server = await startStoreServer({ secret });
const connectMs: number[] = [];
for (let index = 0; index < 20; index++) {
  const started = performance.now();
  const client = await connectStore({ host: server.host, port: server.port, secret });
  connectMs.push(performance.now() - started);
  await client.close();
}
const client = await connectStore({ host: server.host, port: server.port, secret });
const addMicroseconds: number[] = [];
const pipelinedPerSecond: number[] = [];
const bulkMegabytesPerSecond: number[] = [];
const value = randomBytes(1 << 20);
for (let run = 0; run < runs; run++) {
  let started = performance.now();
  for (let index = 0; index < ops; index++) await client.add('counter', 1);
  addMicroseconds.push(((performance.now() - started) * 1000) / ops);
  started = performance.now();
  await Promise.all(Array.from({ length: ops }, (_, index) => client.set(`key-${index}`, 'value')));
  pipelinedPerSecond.push(ops / ((performance.now() - started) / 1000));
  started = performance.now();
  for (let index = 0; index < 32; index++) await client.set('bulk', value);
  bulkMegabytesPerSecond.push((32 * value.length) / 1e6 / ((performance.now() - started) / 1000));
}
await client.close();
await server.close();
console.log(
  JSON.stringify(
    {
      connectMs: summary(connectMs),
      addRoundTripMicroseconds: summary(addMicroseconds),
      pipelinedSetsPerSecond: summary(pipelinedPerSecond),
      bulkSetMegabytesPerSecond: summary(bulkMegabytesPerSecond),
      runs,
      ops,
      loadAverage: loadavg().map((load) => Math.round(load * 100) / 100),
    },
    null,
    2,
  ),
);
