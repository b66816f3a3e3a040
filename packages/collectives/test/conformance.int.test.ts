import { describe, expect, it } from 'vitest';
import { registerBackend, registeredBackends } from '../src/internal/backend-registry.js';
import { conformanceLaunchers, tcpLauncher } from './conformance/launchers.js';
import { loopbackBackend } from './support/loopback-backend/loopback-backend.js';

// The package's backends plus the test-only one, registered from outside as a user would.
registerBackend(loopbackBackend);
const backends = registeredBackends();

describe('conformance: every registered backend', () => {
  it('has a conformance set-up for every registered backend', () => {
    expect(backends).toEqual(expect.arrayContaining(['tcp', 'shm', 'mpi', 'loopback']));
    expect(backends.filter((name) => conformanceLaunchers[name] === undefined)).toEqual([]);
  });

  for (const backend of backends) {
    const launcher = conformanceLaunchers[backend];
    if (launcher === undefined) continue;
    for (const size of launcher.sizes ?? [1, 2, 3, 4]) {
      it(`${backend}: every op x dtype x size matches the reference on ${size} ${launcher.ranks}`, async () => {
        const results = await launcher.run(size);
        expect(results).toHaveLength(size);
        expect(results.flat().filter((outcome) => outcome.failure !== undefined)).toEqual([]);
        expect(results[0]!.length).toBeGreaterThan(launcher.minimumCases);
      }, 180_000);
    }
  }

  // The tcp suite above runs over Unix-domain sockets ([Note: local peer sockets]); this is the
  // same native path over TCP loopback, as between hosts.
  for (const size of [2, 3]) {
    it(`tcp over TCP (FSDP_TCP_LOCAL=tcp): every op x dtype x size matches the reference on ${size} processes`, async () => {
      const results = await tcpLauncher(process.platform === 'linux' ? '1' : undefined, 'tcp').run(size);
      expect(results).toHaveLength(size);
      expect(results.flat().filter((outcome) => outcome.failure !== undefined)).toEqual([]);
      expect(results[0]!.length).toBeGreaterThan(50);
    }, 180_000);
  }

  // The tcp suite above runs on the native data path (koffi); this is the node:net fallback.
  for (const size of [2, 3]) {
    it(`tcp on node:net (FSDP_TCP_NATIVE=0): every op x dtype x size matches the reference on ${size} processes`, async () => {
      const results = await tcpLauncher('0').run(size);
      expect(results).toHaveLength(size);
      expect(results.flat().filter((outcome) => outcome.failure !== undefined)).toEqual([]);
      expect(results[0]!.length).toBeGreaterThan(50);
    }, 180_000);
  }
});
