import { describe } from 'vitest';
import { backendConformance } from './conformance/backend-conformance.js';

describe('conformance: the mpi backend under mpirun', () => {
  backendConformance('mpi');
});
