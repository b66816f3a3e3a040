import { CollectiveError } from '../errors.js';
import { mpiBackend } from '../mpi/mpi-backend.js';
import type { BackendDefinition } from './backend-definition.js';
import { shmBackend } from './shm/shm-backend.js';
import { tcpBackend } from './tcp/tcp-backend.js';

/**
 * The one place backends are registered ([Note: backend definition]). The package's own are
 * listed here; `registerBackend` adds one from outside (the test suite's loopback backend), on
 * the thread that creates its groups.
 */
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

/** The backend registered under `name`; a CollectiveError naming the registered ones otherwise. */
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

/** Names of every registered backend, the package's own first. */
export function registeredBackends(): string[] {
  return [...backends.keys()];
}
