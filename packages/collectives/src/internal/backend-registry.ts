import { CollectiveError } from '../errors.js';
import { mpiBackend } from '../mpi/mpi-backend.js';
import type { BackendDefinition } from './backend-definition.js';
import { shmBackend } from './shm/shm-backend.js';
import { tcpBackend } from './tcp/tcp-backend.js';

/** [Note: backend definition]; `registerBackend` adds one from outside, on the thread creating its groups. */
const backends = new Map<string, BackendDefinition<never>>([
  [tcpBackend.name, tcpBackend as BackendDefinition<never>],
  [shmBackend.name, shmBackend as BackendDefinition<never>],
  [mpiBackend.name, mpiBackend as BackendDefinition<never>],
]);

export function registerBackend<Config>(definition: BackendDefinition<Config>): void {
  if (backends.has(definition.name)) {
    throw new CollectiveError(`A collectives backend named '${definition.name}' is already registered.`, {
      code: 'invalid-argument',
      expected: `a name other than ${[...backends.keys()].join(', ')}`,
      actual: definition.name,
      fix: 'give the backend its own name.',
    });
  }
  if (definition.loadEngine === undefined && definition.engineModule === undefined) {
    throw new CollectiveError(`Backend '${definition.name}' names no engine.`, {
      code: 'invalid-argument',
      expected: 'loadEngine or engineModule',
      actual: Object.keys(definition),
      fix: 'set engineModule to the URL of a module that exports createEngine(init, context).',
    });
  }
  backends.set(definition.name, definition as BackendDefinition<never>);
}

export function findBackend(name: string, rank?: number): BackendDefinition<unknown> {
  const definition = backends.get(name);
  if (definition === undefined) {
    throw new CollectiveError(`Unknown collectives backend '${name}'.`, {
      code: 'invalid-argument',
      ...(rank === undefined ? {} : { rank }),
      expected: [...backends.keys()],
      actual: name,
      fix: `use one of ${[...backends.keys()].map((known) => `'${known}'`).join(', ')}, or register the backend first.`,
    });
  }
  return definition as BackendDefinition<unknown>;
}

export function registeredBackends(): string[] {
  return [...backends.keys()];
}
