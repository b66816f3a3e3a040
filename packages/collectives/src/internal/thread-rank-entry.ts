/** Entry of a rank thread started by spawnThreadRanks: runs the user's function, reports back. */
import { parentPort, workerData } from 'node:worker_threads';

interface RankData {
  fsdpThreadRank: { rank: number; size: number };
  moduleUrl: string;
  exportName: string;
  args: unknown;
}

const data = workerData as RankData;
const port = parentPort!;

async function main(): Promise<void> {
  try {
    const module = (await import(data.moduleUrl)) as Record<string, unknown>;
    const fn = module[data.exportName];
    if (typeof fn !== 'function') {
      throw new Error(`${data.moduleUrl} has no exported function '${data.exportName}'`);
    }
    const { rank, size } = data.fsdpThreadRank;
    const value: unknown = await fn({ rank, size, args: data.args });
    port.postMessage({ type: 'result', value });
  } catch (error) {
    port.postMessage({
      type: 'error',
      message: error instanceof Error ? error.message : String(error),
      stack: error instanceof Error ? error.stack : undefined,
      code: (error as { code?: unknown } | null)?.code,
    });
  }
}

void main();
