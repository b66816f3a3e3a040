import { describe, expect, it } from 'vitest';
import { registerBackend, registeredBackends } from '../src/internal/backend-registry.js';
import { backendConformance } from './conformance/backend-conformance.js';
import { conformanceLaunchers } from './conformance/launchers.js';
import { loopbackBackend } from './support/loopback-backend/loopback-backend.js';

// The package's backends plus the test-only one, registered from outside as a user would. The
// suite is split by backend so vitest's workers share it: tcp here, tcp's other data paths in
// conformance-tcp-paths, shm and loopback in conformance-shm, mpi in conformance-mpi.
registerBackend(loopbackBackend);
const backends = registeredBackends();
const backendsWithTheirOwnFile = ['shm', 'loopback', 'mpi'];

describe('conformance: every registered backend', () => {
  it('has a conformance set-up for every registered backend', () => {
    expect(backends).toEqual(expect.arrayContaining(['tcp', 'shm', 'mpi', 'loopback']));
    expect(backends.filter((name) => conformanceLaunchers[name] === undefined)).toEqual([]);
  });

  // Every backend without a file of its own runs here (tcp, and any a contributor registers).
  for (const backend of backends)
    if (!backendsWithTheirOwnFile.includes(backend)) backendConformance(backend);
});
