import { CollectiveError } from '../errors.js';
import { packageRequire, resolveKoffi } from '../internal/start-worker.js';

export { resolveKoffi };

/**
 * [Note: mpi binding] The system's MPI library through koffi, loaded on the main thread (init,
 * rank, size, finalize) and again on each mpi group's communication worker (the ops): dlopen
 * returns the same library, so both threads share one MPI state. Open MPI's ABI only
 * (`libmpi.so.40`): its handles (MPI_COMM_WORLD, MPI_FLOAT, MPI_SUM, ...) are the addresses of
 * exported globals (`ompi_mpi_comm_world`, ...), which koffi's `lib.symbol` returns; MPICH's
 * handles are integers and its library is another soname, so it is refused by name.
 * `FSDP_MPI_LIBRARY` names another file (a cluster's module, a newer Open MPI).
 */
export const MPI_LIBRARY_VARIABLE = 'FSDP_MPI_LIBRARY';
const DEFAULT_LIBRARY = 'libmpi.so.40';

export const THREAD_LEVELS = ['single', 'funneled', 'serialized', 'multiple'] as const;
export const MPI_THREAD_MULTIPLE = 3;
export const MPI_ANY_SOURCE = -1;
/** MPI_IN_PLACE is `(void *) 1` in Open MPI's mpi.h. */
const MPI_IN_PLACE = 1;

type Handle = unknown;
type Buffer = ArrayBufferView | null;
type Slot = BigUint64Array;

interface Koffi {
  load(path: string): {
    func(prototype: string): (...args: unknown[]) => number;
    symbol(name: string, type: unknown): unknown;
  };
  opaque(name?: string): unknown;
  decode(pointer: unknown, type: string): unknown;
}

export interface MpiHandles {
  commWorld: Handle;
  float: Handle;
  int: Handle;
  uint16: Handle;
  byte: Handle;
  sum: Handle;
  max: Handle;
  min: Handle;
  errorsReturn: Handle;
}

/** Each call returns MPI's error code (0 = MPI_SUCCESS). */
export type MpiLibrary = ReturnType<typeof loadMpiLibrary>;

export function mpiLibraryPath(env: NodeJS.ProcessEnv = process.env): string {
  const configured = env[MPI_LIBRARY_VARIABLE]?.trim();
  return configured === undefined || configured === '' ? DEFAULT_LIBRARY : configured;
}

export function loadMpiLibrary(koffiPath: string | undefined, path: string, rank?: number) {
  const where = rank === undefined ? {} : { rank };
  if (koffiPath === undefined) {
    throw new CollectiveError(
      'The mpi backend calls the MPI library through koffi, which is not installed.',
      {
        code: 'invalid-argument',
        ...where,
        fix: 'npm install koffi (an optional peer dependency of @fsdp-ts/collectives).',
      },
    );
  }
  const koffi = packageRequire()(koffiPath) as Koffi;
  let library: ReturnType<Koffi['load']>;
  try {
    library = koffi.load(path);
  } catch (error) {
    throw new CollectiveError(
      `The mpi backend could not open the MPI library '${path}': ${firstLine(error)}`,
      {
        code: 'invalid-argument',
        ...where,
        expected: `Open MPI's ${DEFAULT_LIBRARY} (or the file ${MPI_LIBRARY_VARIABLE} names)`,
        actual: path,
        cause: error,
        fix: `install Open MPI (apt-get install libopenmpi3 openmpi-bin), or on a cluster load its MPI module (module load openmpi) and set ${MPI_LIBRARY_VARIABLE} to its libmpi.so.`,
      },
    );
  }
  const handleType = koffi.opaque('ompi_handle');
  const symbol = (name: string): Handle => {
    try {
      return library.symbol(name, handleType);
    } catch (error) {
      throw new CollectiveError(`'${path}' has no symbol ${name}: it is not Open MPI's library.`, {
        code: 'invalid-argument',
        ...where,
        expected: 'an Open MPI libmpi.so (Open MPI 4 or 5)',
        actual: path,
        cause: error,
        fix: `point ${MPI_LIBRARY_VARIABLE} at Open MPI's libmpi.so.40; MPICH and its derivatives are not supported.`,
      });
    }
  };
  const handles: MpiHandles = {
    commWorld: symbol('ompi_mpi_comm_world'),
    float: symbol('ompi_mpi_float'),
    int: symbol('ompi_mpi_int'),
    uint16: symbol('ompi_mpi_uint16_t'),
    byte: symbol('ompi_mpi_byte'),
    sum: symbol('ompi_mpi_op_sum'),
    max: symbol('ompi_mpi_op_max'),
    min: symbol('ompi_mpi_op_min'),
    errorsReturn: symbol('ompi_mpi_errors_return'),
  };
  const f = (prototype: string) => library.func(prototype);
  // A communicator, group or request lives in a BigUint64Array slot: `void **` to the calls that
  // fill it, and its value (`uintptr_t`) to the calls that take it.
  const value = (slot: Slot): bigint => slot[0]!;
  const allreduce = f('int MPI_Iallreduce(void *, void *, int, void *, void *, uintptr_t, void *)');
  const allreduceInPlace = f('int MPI_Iallreduce(uintptr_t, void *, int, void *, void *, uintptr_t, void *)');
  const allgather = f('int MPI_Iallgather(void *, int, void *, void *, int, void *, uintptr_t, void *)');
  const allgatherInPlace = f(
    'int MPI_Iallgather(uintptr_t, int, void *, void *, int, void *, uintptr_t, void *)',
  );
  const reduceScatter = f(
    'int MPI_Ireduce_scatter_block(void *, void *, int, void *, void *, uintptr_t, void *)',
  );
  const bcast = f('int MPI_Ibcast(void *, int, void *, int, uintptr_t, void *)');
  const barrier = f('int MPI_Ibarrier(uintptr_t, void *)');
  const send = f('int MPI_Isend(void *, int, void *, int, int, uintptr_t, void *)');
  const recv = f('int MPI_Irecv(void *, int, void *, int, int, uintptr_t, void *)');
  const testall = f('int MPI_Testall(int, void *, void *, void *)');
  const test = f('int MPI_Test(void *, void *, void *)');
  const cancel = f('int MPI_Cancel(void *)');
  const requestFree = f('int MPI_Request_free(void *)');
  const initThread = f('int MPI_Init_thread(void *, void *, int, void *)');
  const initialized = f('int MPI_Initialized(void *)');
  const finalized = f('int MPI_Finalized(void *)');
  const finalize = f('int MPI_Finalize()');
  const commRank = f('int MPI_Comm_rank(void *, void *)');
  const commSize = f('int MPI_Comm_size(void *, void *)');
  const commGroup = f('int MPI_Comm_group(void *, void *)');
  const groupIncl = f('int MPI_Group_incl(uintptr_t, int, void *, void *)');
  const groupFree = f('int MPI_Group_free(void *)');
  const commCreateGroup = f('int MPI_Comm_create_group(void *, uintptr_t, int, void *)');
  const commFree = f('int MPI_Comm_free(void *)');
  const setErrhandler = f('int MPI_Comm_set_errhandler(uintptr_t, void *)');
  const errorString = f('int MPI_Error_string(int, void *, void *)');
  return {
    path,
    handles,
    initThread: (required: number, provided: Int32Array) => initThread(null, null, required, provided),
    initialized: (flag: Int32Array) => initialized(flag),
    finalized: (flag: Int32Array) => finalized(flag),
    finalize: () => finalize(),
    commRank: (comm: Handle, into: Int32Array) => commRank(comm, into),
    commSize: (comm: Handle, into: Int32Array) => commSize(comm, into),
    commGroup: (comm: Handle, into: Slot) => commGroup(comm, into),
    groupIncl: (group: Slot, count: number, ranks: Int32Array, into: Slot) =>
      groupIncl(value(group), count, ranks, into),
    groupFree: (group: Slot) => groupFree(group),
    commCreateGroup: (comm: Handle, group: Slot, tag: number, into: Slot) =>
      commCreateGroup(comm, value(group), tag, into),
    commFree: (comm: Slot) => commFree(comm),
    /** MPI_ERRORS_RETURN on `comm`: a failed call returns its code instead of ending the job. */
    returnErrors: (comm: Slot) => setErrhandler(value(comm), handles.errorsReturn),
    /** `input === null`: MPI_IN_PLACE. */
    iallreduce: (
      input: Buffer,
      output: Buffer,
      count: number,
      type: Handle,
      op: Handle,
      comm: Slot,
      request: Slot,
    ) =>
      input === null
        ? allreduceInPlace(MPI_IN_PLACE, output, count, type, op, value(comm), request)
        : allreduce(input, output, count, type, op, value(comm), request),
    /** `input === null`: MPI_IN_PLACE (this rank's block of `output` is its input). */
    iallgather: (input: Buffer, count: number, type: Handle, output: Buffer, comm: Slot, request: Slot) =>
      input === null
        ? allgatherInPlace(MPI_IN_PLACE, count, type, output, count, type, value(comm), request)
        : allgather(input, count, type, output, count, type, value(comm), request),
    ireduceScatterBlock: (
      input: Buffer,
      output: Buffer,
      count: number,
      type: Handle,
      op: Handle,
      comm: Slot,
      request: Slot,
    ) => reduceScatter(input, output, count, type, op, value(comm), request),
    ibcast: (buffer: Buffer, count: number, type: Handle, root: number, comm: Slot, request: Slot) =>
      bcast(buffer, count, type, root, value(comm), request),
    ibarrier: (comm: Slot, request: Slot) => barrier(value(comm), request),
    isend: (
      buffer: Buffer,
      count: number,
      type: Handle,
      peer: number,
      tag: number,
      comm: Slot,
      request: Slot,
    ) => send(buffer, count, type, peer, tag, value(comm), request),
    irecv: (
      buffer: Buffer,
      count: number,
      type: Handle,
      peer: number,
      tag: number,
      comm: Slot,
      request: Slot,
    ) => recv(buffer, count, type, peer, tag, value(comm), request),
    /** MPI_Testall over `count` requests; `flag[0]` becomes 1 once all completed. */
    testall: (count: number, requests: Slot, flag: Int32Array) => testall(count, requests, flag, null),
    /** MPI_Test of one request; `status` receives MPI_Status (Open MPI: source, tag, error, ...). */
    test: (request: Slot, flag: Int32Array, status: Int32Array) => test(request, flag, status),
    cancel: (request: Slot) => cancel(request),
    requestFree: (request: Slot) => requestFree(request),
    errorString: (code: number): string => {
      const text = new Uint8Array(512);
      const length = new Int32Array(1);
      if (errorString(code, text, length) !== 0) return `MPI error ${code}`;
      return new TextDecoder().decode(text.subarray(0, length[0]));
    },
  };
}

function firstLine(error: unknown): string {
  return String(error instanceof Error ? error.message : error).split('\n')[0]!;
}
