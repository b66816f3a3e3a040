import { describe, expect, it } from 'vitest';
import { CollectiveError } from '../src/index.js';
import { mpiLaunched, mpiLaunchedRank } from '../src/mpi/mpi-backend.js';
import { loadMpiLibrary, mpiLibraryPath, resolveKoffi } from '../src/mpi/mpi-library.js';

describe('mpi job detection', () => {
  it('recognises mpirun, PMIx and srun --mpi=pmi2 jobs, and leaves torchrun-style jobs to tcp', () => {
    expect(mpiLaunched({ OMPI_COMM_WORLD_SIZE: '2', OMPI_COMM_WORLD_RANK: '1' })).toBe(true);
    expect(mpiLaunched({ PMIX_RANK: '0', SLURM_PROCID: '0', SLURM_NTASKS: '2' })).toBe(true);
    expect(mpiLaunched({ PMI_RANK: '1', SLURM_PROCID: '1' })).toBe(true);
    // Plain srun (no MPI plugin) and any launcher that sets RANK keep the tcp default.
    expect(mpiLaunched({ SLURM_PROCID: '0', SLURM_NTASKS: '2' })).toBe(false);
    expect(mpiLaunched({ OMPI_COMM_WORLD_SIZE: '2', RANK: '0', WORLD_SIZE: '2' })).toBe(false);
    expect(mpiLaunched({})).toBe(false);
    expect(mpiLaunchedRank({ OMPI_COMM_WORLD_RANK: '1', OMPI_COMM_WORLD_SIZE: '3' })).toEqual({
      rank: 1,
      size: 3,
    });
    expect(mpiLaunchedRank({ PMIX_RANK: '2', SLURM_NTASKS: '4' })).toEqual({ rank: 2, size: 4 });
    expect(mpiLaunchedRank({})).toBeUndefined();
  });
});

describe('loading the MPI library', () => {
  it('opens libmpi.so.40 unless FSDP_MPI_LIBRARY names another file', () => {
    expect(mpiLibraryPath({})).toBe('libmpi.so.40');
    expect(mpiLibraryPath({ FSDP_MPI_LIBRARY: '/opt/openmpi/lib/libmpi.so' })).toBe(
      '/opt/openmpi/lib/libmpi.so',
    );
  });

  it('a missing library fails with a CollectiveError naming the package to install and the variable', () => {
    let error: unknown;
    try {
      loadMpiLibrary(resolveKoffi(), '/nonexistent/libmpi.so.40', 0);
    } catch (caught) {
      error = caught;
    }
    expect(CollectiveError.isInstance(error)).toBe(true);
    const { code, message } = error as CollectiveError;
    expect(code).toBe('invalid-argument');
    expect(message).toContain('/nonexistent/libmpi.so.40');
    expect(message).toContain('apt-get install libopenmpi3');
    expect(message).toContain('FSDP_MPI_LIBRARY');
  });

  it('a library that is not Open MPI (libc) is refused by the symbol it lacks', () => {
    expect(() => loadMpiLibrary(resolveKoffi(), 'libc.so.6', 0)).toThrow(/ompi_mpi_comm_world.*not Open MPI/);
  });
});
