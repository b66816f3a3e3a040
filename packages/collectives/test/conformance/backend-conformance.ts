/**
 * The conformance cases of one backend as vitest tests: every op × dtype × size against the
 * reference, at each world size its launcher names. The suite is split into files by backend
 * (conformance*.int.test.ts) so that vitest's workers run them side by side ([Note: suite
 * schedule] in vitest.config.ts).
 */
import { expect, it } from 'vitest';
import { conformanceLaunchers, tcpLauncher } from './launchers.js';

export function backendConformance(backend: string): void {
  const launcher = conformanceLaunchers[backend];
  if (launcher === undefined) throw new Error(`no conformance launcher for backend "${backend}"`);
  for (const size of launcher.sizes ?? [1, 2, 3, 4]) {
    it(`${backend}: every op x dtype x size matches the reference on ${size} ${launcher.ranks}`, async () => {
      const results = await launcher.run(size);
      expect(results).toHaveLength(size);
      expect(results.flat().filter((outcome) => outcome.failure !== undefined)).toEqual([]);
      expect(results[0]!.length).toBeGreaterThan(launcher.minimumCases);
    }, 180_000);
  }
}

/** The tcp backend's other data paths: TCP loopback (as between hosts) and the node:net fallback. */
export function tcpPathConformance(): void {
  // The tcp suite runs over Unix-domain sockets ([Note: local peer sockets]); this is the
  // same native path over TCP loopback, as between hosts.
  for (const size of [2, 3]) {
    it(`tcp over TCP (FSDP_TCP_LOCAL=tcp): every op x dtype x size matches the reference on ${size} processes`, async () => {
      const results = await tcpLauncher(process.platform === 'linux' ? '1' : undefined, 'tcp').run(size);
      expect(results).toHaveLength(size);
      expect(results.flat().filter((outcome) => outcome.failure !== undefined)).toEqual([]);
      expect(results[0]!.length).toBeGreaterThan(50);
    }, 180_000);
  }
  // The tcp suite runs on the native data path (koffi); this is the node:net fallback.
  for (const size of [2, 3]) {
    it(`tcp on node:net (FSDP_TCP_NATIVE=0): every op x dtype x size matches the reference on ${size} processes`, async () => {
      const results = await tcpLauncher('0').run(size);
      expect(results).toHaveLength(size);
      expect(results.flat().filter((outcome) => outcome.failure !== undefined)).toEqual([]);
      expect(results[0]!.length).toBeGreaterThan(50);
    }, 180_000);
  }
}
