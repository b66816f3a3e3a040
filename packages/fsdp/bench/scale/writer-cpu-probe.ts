/**
 * CPU cost of saving one rank's checkpoint file, per GB: Node's SHA-256 alone, a plain write
 * (8 MiB writes, fdatasync every 64 MiB, fsync at the end, as the writer does) and
 * RankFileWriter, interleaved (ABC ABC ...) on the same data. CPU time (user + system of this
 * process) rather than wall time, because the machine it runs on is shared; user time is the
 * hashing and copying, system time the kernel's share of the write (it varies with the page cache).
 *
 *   npm run bench:writer-cpu    (WRITER_PROBE_MIB=256 WRITER_PROBE_ROUNDS=3)
 */
import { createHash } from 'node:crypto';
import { closeSync, fdatasyncSync, fsyncSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { RankFileWriter } from '@fsdp-ts/checkpoint/internal';

const mebibytes = Number(process.env.WRITER_PROBE_MIB ?? 256);
const rounds = Number(process.env.WRITER_PROBE_ROUNDS ?? 3);
const directory = mkdtempSync(join(process.env.WRITER_PROBE_DIR ?? tmpdir(), 'writer-cpu-probe-'));
const data = new Float32Array((mebibytes << 20) / 4);
for (let index = 0; index < data.length; index++) data[index] = Math.random();
const bytes = new Uint8Array(data.buffer);
const gigabytes = bytes.byteLength / 1e9;

interface Measurement {
  cpuMsPerGb: number;
  userMsPerGb: number;
  wallMsPerGb: number;
}

function measure(run: () => void): Measurement {
  const cpuBefore = process.cpuUsage();
  const wallBefore = performance.now();
  run();
  const cpu = process.cpuUsage(cpuBefore);
  const wall = performance.now() - wallBefore;
  return {
    cpuMsPerGb: (cpu.user + cpu.system) / 1000 / gigabytes,
    userMsPerGb: cpu.user / 1000 / gigabytes,
    wallMsPerGb: wall / gigabytes,
  };
}

const variants: Record<string, () => void> = {
  sha256: () => {
    createHash('sha256').update(bytes).digest('hex');
  },
  'plain write': () => {
    const descriptor = openSync(join(directory, 'plain.bin'), 'w');
    let unsynced = 0;
    for (let start = 0; start < bytes.byteLength; start += 8 << 20) {
      const chunk = bytes.subarray(start, Math.min(start + (8 << 20), bytes.byteLength));
      let written = 0;
      while (written < chunk.byteLength) written += writeSync(descriptor, chunk, written);
      unsynced += chunk.byteLength;
      if (unsynced >= 64 << 20) {
        fdatasyncSync(descriptor);
        unsynced = 0;
      }
    }
    fsyncSync(descriptor);
    closeSync(descriptor);
  },
  RankFileWriter: () => {
    const writer = new RankFileWriter(join(directory, 'writer.bin'), 1 << 20);
    writer.append('', 0, 'parameters', data);
    writer.finish();
  },
};

const results = new Map<string, Measurement[]>();
try {
  for (let round = 0; round < rounds; round++) {
    for (const [name, run] of Object.entries(variants)) {
      const result = measure(run);
      results.set(name, [...(results.get(name) ?? []), result]);
      rmSync(join(directory, 'plain.bin'), { force: true });
      rmSync(join(directory, 'writer.bin'), { force: true });
    }
  }
} finally {
  rmSync(directory, { recursive: true, force: true });
}

const median = (values: number[]): number =>
  [...values].sort((left, right) => left - right)[Math.floor(values.length / 2)] ?? Number.NaN;
console.log(
  `${mebibytes} MiB, ${rounds} interleaved rounds, load ${loadavg()
    .map((load) => load.toFixed(1))
    .join(' ')}`,
);
for (const [name, list] of results) {
  const cpu = list.map((entry) => entry.cpuMsPerGb);
  const user = list.map((entry) => entry.userMsPerGb);
  const wall = list.map((entry) => entry.wallMsPerGb);
  console.log(
    `${name.padEnd(15)} CPU ${median(cpu).toFixed(0).padStart(5)} ms/GB (${Math.min(...cpu).toFixed(0)}-${Math.max(...cpu).toFixed(0)})` +
      `  of which user ${median(user).toFixed(0).padStart(5)} (${Math.min(...user).toFixed(0)}-${Math.max(...user).toFixed(0)})` +
      `  wall ${median(wall).toFixed(0).padStart(5)} ms/GB (${Math.min(...wall).toFixed(0)}-${Math.max(...wall).toFixed(0)})`,
  );
}
