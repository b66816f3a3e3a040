import { describe } from 'vitest';
import { tcpPathConformance } from './conformance/backend-conformance.js';

describe('conformance: the tcp backend on TCP loopback and on node:net', () => {
  tcpPathConformance();
});
