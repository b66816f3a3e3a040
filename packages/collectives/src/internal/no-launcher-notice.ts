import { relative } from 'node:path';

/** The environment variables by which a launcher (fsdp-run, torchrun, srun, mpirun) gives a rank its place. */
const LAUNCHER_VARIABLES = [
  'RANK',
  'WORLD_SIZE',
  'SLURM_PROCID',
  'SLURM_NTASKS',
  'OMPI_COMM_WORLD_SIZE',
  'PMIX_RANK',
] as const;

let told = false;

/**
 * [Note: no launcher] `initProcessGroup()` in a process nobody launched as a rank (no RANK,
 * WORLD_SIZE or Slurm variables, no explicit `rank` or `size`, not a spawnThreadRanks thread) runs
 * as rank 0 of a world of 1, and says so once per process in one stderr line with the command
 * that starts N ranks. It does not fail: a one-process run of the same script is how one tries
 * or debugs it (`npx tsx train.ts`), and world size 1 is a valid job; but it must not look like
 * distributed training that silently is not (architecture/decisions/2026-12-01-no-launcher.md).
 * Passing `{ rank: 0, size: 1 }` states the intent and keeps it quiet.
 */
export function noticeNoLauncher(options: { rank?: number; size?: number }, inThread: boolean): void {
  if (told || inThread || options.rank !== undefined || options.size !== undefined) return;
  if (LAUNCHER_VARIABLES.some((name) => (process.env[name] ?? '') !== '')) return;
  told = true;
  process.stderr.write(`${noLauncherLine(process.argv[1])}\n`);
}

export function noLauncherLine(scriptPath: string | undefined): string {
  const script = scriptPath === undefined ? 'train.ts' : displayPath(scriptPath);
  return `fsdp-ts: no launcher (RANK and WORLD_SIZE are not set), so this runs as a single process (rank 0 of 1); to start N processes: npx fsdp-run --nproc-per-node N ${script}`;
}

function displayPath(path: string): string {
  const fromHere = relative(process.cwd(), path);
  return fromHere !== '' && !fromHere.startsWith('..') ? fromHere : path;
}
