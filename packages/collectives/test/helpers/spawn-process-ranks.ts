import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';

export interface RankRun {
  rank: number;
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Parsed `RESULT <json>` line, if the rank printed one. */
  result: unknown;
  output: string;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/**
 * Starts `size` real processes of `script` with the env:// contract (what fsdp-run sets) and
 * collects each one's RESULT line and exit. Bounded: processes still alive after `timeoutMs` are
 * killed.
 */
export async function spawnProcessRanks(
  size: number,
  script: URL,
  args: string[],
  options: { timeoutMs: number; env?: Record<string, string> },
): Promise<RankRun[]> {
  const port = await freePort();
  const secret = randomBytes(32).toString('hex');
  const runs = Array.from({ length: size }, (_, rank) => {
    const child = spawn(
      process.execPath,
      ['--conditions=@fsdp-ts/source', '--import', 'tsx', fileURLToPath(script), ...args],
      {
        env: {
          ...process.env,
          RANK: String(rank),
          WORLD_SIZE: String(size),
          LOCAL_RANK: String(rank),
          LOCAL_WORLD_SIZE: String(size),
          MASTER_ADDR: '127.0.0.1',
          MASTER_PORT: String(port),
          FSDP_JOB_SECRET: secret,
          ...options.env,
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs);
    return new Promise<RankRun>((resolve) => {
      child.on('exit', (code, signal) => {
        clearTimeout(timer);
        const line = output.split('\n').find((candidate) => candidate.startsWith('RESULT '));
        resolve({
          rank,
          code,
          signal,
          result: line === undefined ? undefined : JSON.parse(line.slice(7)),
          output,
        });
      });
    });
  });
  return Promise.all(runs);
}
