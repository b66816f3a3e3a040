import { describe } from 'vitest';
import { registerBackend } from '../src/internal/backend-registry.js';
import { backendConformance } from './conformance/backend-conformance.js';
import { loopbackBackend } from './support/loopback-backend/loopback-backend.js';

// The test-only loopback backend, registered from outside as a user would (CONTRIBUTING).
registerBackend(loopbackBackend);

describe('conformance: shm thread ranks and the test-only loopback backend', () => {
  backendConformance('shm');
  backendConformance('loopback');
});
