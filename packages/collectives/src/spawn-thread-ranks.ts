import { MessageChannel, type Worker } from 'node:worker_threads';
import type { OptionKeys } from '@fsdp-ts/errors';
import { CollectiveError, type CollectiveErrorDetails } from './errors.js';
import { checkCollectiveOptionKeys } from './internal/check-option-keys.js';
import { createArena } from './internal/shm/shm-arena.js';
import { ShmBroker } from './internal/shm/shm-backend.js';
import { startWorker } from './internal/start-worker.js';

/** What a function run by spawnThreadRanks receives. */
export interface ThreadRankArguments<Args = unknown> {
  rank: number;
  size: number;
  args: Args;
}

/** Options of spawnThreadRanks: the arguments each rank receives and a timeout. */
export interface SpawnThreadRanksOptions {
  /** Structured-cloneable value passed to every rank's function as `args`. */
  args?: unknown;
  /** Milliseconds before all ranks are terminated and the promise rejects. Default 120 000. */
  timeoutMs?: number;
}

/** The keys of SpawnThreadRanksOptions ([Note: option keys] in @fsdp-ts/errors). */
const spawnThreadRanksOptionKeys = {
  args: true,
  timeoutMs: true,
} as const satisfies OptionKeys<SpawnThreadRanksOptions>;

/**
 * Runs `exportName` of the module at `moduleUrl` on `size` ranks, each a worker thread of this
 * process, and resolves with their return values in rank order. Inside, `initProcessGroup()`
 * picks the `shm` backend and this rank automatically. If any rank throws, the others are
 * terminated and the promise rejects with a CollectiveError (code 'launch') naming the rank. A
 * rank that calls `process.exit(0)` ends its thread (its queued ops finish first) with the result
 * `undefined`; another exit code rejects like a throw.
 * The module may be TypeScript when this package runs from source (tsx is registered in the
 * threads); from the build it must be JavaScript.
 */
export async function spawnThreadRanks(
  size: number,
  moduleUrl: string | URL,
  exportName: string,
  options: SpawnThreadRanksOptions = {},
): Promise<unknown[]> {
  checkCollectiveOptionKeys('spawnThreadRanks', options, spawnThreadRanksOptionKeys, {
    nprocs: "torch.multiprocessing.spawn's nprocs is spawnThreadRanks' first argument, size",
    join: 'no equivalent: the promise resolves when every rank has returned',
    timeout: 'timeoutMs here, in milliseconds',
  });
  if (!Number.isInteger(size) || size < 1) {
    throw new CollectiveError(`spawnThreadRanks needs a positive integer size; got ${size}.`, {
      code: 'invalid-argument',
      expected: '>= 1',
      actual: size,
    });
  }
  const broker = new ShmBroker();
  const arena = createArena();
  const workers: Worker[] = [];
  const timeoutMs = options.timeoutMs ?? 120_000;
  const results = new Array<unknown>(size);
  try {
    await new Promise<void>((resolve, reject) => {
      let remaining = size;
      const fail = (message: string, details: Partial<CollectiveErrorDetails> = {}) => {
        clearTimeout(timer);
        reject(new CollectiveError(message, { code: 'launch', ...details }));
      };
      const timer = setTimeout(() => {
        const fix = 'look for a rank blocked in an op the others never issue, or raise timeoutMs.';
        fail(`Thread ranks did not all finish within ${timeoutMs} ms.`, { code: 'timeout', fix });
      }, timeoutMs);
      for (let rank = 0; rank < size; rank++) {
        const channel = new MessageChannel();
        broker.attach(channel.port1);
        const worker = startWorker('thread-rank-entry', {
          workerData: {
            fsdpThreadRank: { rank, size, broker: channel.port2, arena },
            moduleUrl: String(moduleUrl),
            exportName,
            args: options.args,
          },
          transferList: [channel.port2],
        });
        workers.push(worker);
        let finished = false;
        const finish = (value: unknown) => {
          if (finished) return;
          finished = true;
          results[rank] = value;
          if (--remaining === 0) {
            clearTimeout(timer);
            resolve();
          }
        };
        // A rank that calls process.exit(0) ends its thread like a script that ends: its result
        // is undefined. Another code fails the run ([Note: process exit] in communication-client.ts).
        worker.on('exit', (code) => {
          if (code === 0) finish(undefined);
          else if (!finished)
            fail(`Thread rank ${rank} exited with code ${code} before returning.`, { rank });
        });
        worker.on(
          'message',
          (message: { type: string; value?: unknown; message?: string; stack?: string }) => {
            if (message.type === 'result') finish(message.value);
            else if (message.type === 'error')
              fail(`Thread rank ${rank} failed: ${message.message}`, { rank, cause: message.stack });
          },
        );
        worker.on('error', (error) =>
          fail(`Thread rank ${rank} crashed: ${error.message}`, { rank, cause: error }),
        );
      }
    });
  } finally {
    await Promise.all(workers.map((worker) => worker.terminate()));
  }
  return results;
}
