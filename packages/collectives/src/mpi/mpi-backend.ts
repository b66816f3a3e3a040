import { createHash } from 'node:crypto';
import { CollectiveError } from '../errors.js';
import type { BackendDefinition } from '../internal/backend-definition.js';
import { CommunicationClient } from '../internal/communication-client.js';
import type { MpiInit } from './mpi-engine.js';
import {
  loadMpiLibrary,
  MPI_THREAD_MULTIPLE,
  type MpiLibrary,
  mpiLibraryPath,
  resolveKoffi,
  THREAD_LEVELS,
} from './mpi-library.js';

/** The worker loads koffi and the library again. */
export interface MpiConfig {
  koffiPath: string;
  libraryPath: string;
}

/**
 * Started by mpirun/mpiexec (OMPI_COMM_WORLD_SIZE), a PMIx launcher (PMIX_RANK) or srun
 * --mpi=pmi2 (PMI_RANK with SLURM_*), and RANK unset (a torchrun-style launcher keeps tcp).
 */
export function mpiLaunched(env: NodeJS.ProcessEnv = process.env): boolean {
  const set = (name: string) => (env[name] ?? '').trim() !== '';
  if (set('RANK')) return false;
  return set('OMPI_COMM_WORLD_SIZE') || set('PMIX_RANK') || (set('PMI_RANK') && set('SLURM_PROCID'));
}

/** This rank as the MPI launcher states it, before MPI is initialised. */
export function mpiLaunchedRank(
  env: NodeJS.ProcessEnv = process.env,
): { rank: number; size: number } | undefined {
  const rank = env.OMPI_COMM_WORLD_RANK ?? env.PMIX_RANK ?? env.PMI_RANK;
  const size = env.OMPI_COMM_WORLD_SIZE ?? env.SLURM_NTASKS ?? env.PMI_SIZE;
  if (rank === undefined || size === undefined) return undefined;
  const parsed = { rank: Number(rank), size: Number(size) };
  return Number.isInteger(parsed.rank) && Number.isInteger(parsed.size) ? parsed : undefined;
}

interface MpiRuntime {
  library: MpiLibrary;
  koffiPath: string;
  rank: number;
  size: number;
}

let runtime: MpiRuntime | undefined;
let finalizeInstalled = false;

/**
 * [Note: mpi threads] MPI is initialised once per process, on the main thread, with
 * MPI_THREAD_MULTIPLE (every group's worker calls MPI from its own thread, at the same time as
 * others'); a library that grants less fails here. MPI_Finalize runs on the main thread at a
 * clean exit, after the workers finished their queues ([Note: process exit]); a failing process
 * skips it, so mpirun ends the job.
 */
function startMpi(rank: number): MpiRuntime {
  if (runtime !== undefined) return runtime;
  const koffiPath = resolveKoffi();
  const library = loadMpiLibrary(koffiPath, mpiLibraryPath(), rank);
  const flag = new Int32Array(1);
  library.finalized(flag);
  if (flag[0] !== 0) {
    throw new CollectiveError('MPI was already finalized in this process; it cannot start again.', {
      code: 'invalid-argument',
      rank,
      fix: 'create every mpi group before the process ends; one process runs one MPI job.',
    });
  }
  const provided = new Int32Array(1);
  library.initialized(flag);
  if (flag[0] === 0) {
    const code = library.initThread(MPI_THREAD_MULTIPLE, provided);
    if (code !== 0) {
      throw new CollectiveError(`MPI_Init_thread failed: ${library.errorString(code)}.`, {
        code: 'invalid-argument',
        rank,
        fix: 'start the job with mpirun/mpiexec or srun --mpi=pmix, and check that Open MPI runs here (mpirun -np 1 hostname).',
      });
    }
  } else provided[0] = MPI_THREAD_MULTIPLE;
  if (provided[0]! < MPI_THREAD_MULTIPLE) {
    throw new CollectiveError(
      `The MPI library granted thread level MPI_THREAD_${THREAD_LEVELS[provided[0]!]?.toUpperCase() ?? provided[0]}; the mpi backend needs MPI_THREAD_MULTIPLE.`,
      {
        code: 'invalid-argument',
        rank,
        expected: 'MPI_THREAD_MULTIPLE',
        actual: THREAD_LEVELS[provided[0]!] ?? provided[0],
        fix: "each group's communication worker thread calls MPI, several at once: use an Open MPI built with thread support (the default since Open MPI 3), or the tcp backend.",
      },
    );
  }
  const into = new Int32Array(1);
  library.commRank(library.handles.commWorld, into);
  const worldRank = into[0]!;
  library.commSize(library.handles.commWorld, into);
  runtime = { library, koffiPath: koffiPath!, rank: worldRank, size: into[0]! };
  return runtime;
}

/** [Note: mpi threads] */
function installFinalize(library: MpiLibrary): void {
  if (finalizeInstalled) return;
  finalizeInstalled = true;
  process.on('exit', (code) => {
    if (code === 0 && process.exitCode !== 1) library.finalize();
  });
}

/** A tag for MPI_Comm_create_group: the same on every member, distinct per group key. */
function groupTag(key: string): number {
  return 100 + (createHash('sha256').update(key).digest().readUInt32BE(0) % 30_000);
}

/** mpi: the system's Open MPI moves the bytes ([Note: mpi engine]). */
export const mpiBackend: BackendDefinition<MpiConfig> = {
  name: 'mpi',

  async configure(options, identity) {
    if (options.secure === true) {
      throw new CollectiveError('The mpi backend cannot encrypt its data: MPI moves the bytes.', {
        code: 'invalid-argument',
        rank: identity.rank,
        fix: "drop secure (and FSDP_SECURE), or use backend 'tcp' with secure: true.",
      });
    }
    const mpi = startMpi(identity.rank);
    for (const [name, given, actual] of [
      ['rank', options.rank, mpi.rank],
      ['size', options.size, mpi.size],
    ] as const) {
      if (given !== undefined && given !== actual) {
        throw new CollectiveError(`initProcessGroup: ${name} ${given} disagrees with MPI's ${actual}.`, {
          code: 'invalid-argument',
          rank: mpi.rank,
          expected: actual,
          actual: given,
          fix: `leave ${name} out with the mpi backend: MPI_COMM_WORLD decides it.`,
        });
      }
    }
    identity.rank = mpi.rank;
    identity.size = mpi.size;
    identity.worldRanks = Array.from({ length: mpi.size }, (_, index) => index);
    return { koffiPath: mpi.koffiPath, libraryPath: mpi.library.path };
  },

  async start(setup) {
    const init: MpiInit = {
      backend: 'mpi',
      rank: setup.rank,
      size: setup.size,
      abort: new Int32Array(new SharedArrayBuffer(4)),
      koffiPath: setup.config.koffiPath,
      libraryPath: setup.config.libraryPath,
      worldRanks: setup.worldRanks,
      tag: groupTag(setup.key),
    };
    const { client } = await CommunicationClient.start(mpiBackend, init, [], 'ready', setup.timeoutMs);
    installFinalize(runtime!.library);
    client.markReady();
    return client;
  },

  loadEngine: () => import('./mpi-engine.js'),

  abort() {
    // The worker tests init.abort between MPI_Test calls.
  },
};
