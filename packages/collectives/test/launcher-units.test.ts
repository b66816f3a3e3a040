import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CollectiveError } from '../src/errors.js';
import { parseLaunchArguments } from '../src/launcher/launch-options.js';
import {
  buildWorkerCommand,
  buildWorkerEnvironment,
  checkWorkerScript,
  PARENT_WATCHDOG_IMPORT,
} from '../src/launcher/worker-command.js';
import { LinePrefixer } from '../src/launcher/worker-process.js';
import { errorOf } from './support/fixtures.js';

describe('parseLaunchArguments', () => {
  it('reads options, leaves what follows the script to the script', () => {
    const options = parseLaunchArguments(
      ['--nproc-per-node', '2', '--max-restarts', '1', 'train.js', '--nproc-per-node', '9', 'x'],
      {},
    );
    expect(options).toMatchObject({
      nprocPerNode: 2,
      nnodes: 1,
      nodeRank: 0,
      masterAddr: '127.0.0.1',
      masterPort: 0,
      maxRestarts: 1,
      timeoutSeconds: 300,
      script: 'train.js',
      scriptArguments: ['--nproc-per-node', '9', 'x'],
    });
  });

  it('takes node defaults from Slurm and the master from MASTER_ADDR/MASTER_PORT', () => {
    const env = { SLURM_NNODES: '4', SLURM_NODEID: '3', MASTER_ADDR: 'node01', MASTER_PORT: '29500' };
    expect(parseLaunchArguments(['--nproc-per-node', '2', 'train.js'], env)).toMatchObject({
      nnodes: 4,
      nodeRank: 3,
      masterAddr: 'node01',
      masterPort: 29500,
    });
  });

  it('--nnodes MIN:MAX makes an elastic job; N stays fixed; a bad range is refused', () => {
    const options = parseLaunchArguments(
      [
        '--nproc-per-node',
        '2',
        '--nnodes',
        '2:4',
        '--master-port',
        '29500',
        '--heartbeat-timeout',
        '5',
        'a.js',
      ],
      {},
    );
    expect(options).toMatchObject({ nnodes: 4, nodeRank: 0 });
    expect(options.elastic).toEqual({
      minNodes: 2,
      maxNodes: 4,
      heartbeatTimeoutSeconds: 5,
      restartGraceSeconds: 30,
      lastCallSeconds: 1,
      joinTimeoutSeconds: 300,
    });
    const fixed = parseLaunchArguments(
      ['--nproc-per-node', '1', '--nnodes', '2', '--master-port', '1', 'a.js'],
      {},
    );
    expect(fixed.elastic).toBeUndefined();
    expect(() => parseLaunchArguments(['--nproc-per-node', '1', '--nnodes', '3:2', 'a.js'], {})).toThrow(
      /expected N or MIN:MAX with 1 <= MIN <= MAX, got '3:2'/,
    );
    expect(
      errorOf(() => parseLaunchArguments(['--nproc-per-node', '1', '--nnodes', '1:2', 'a.js'], {})).message,
    ).toContain('--master-port');
  });

  it('rejects inconsistent multi-node options with a fix', () => {
    const noPort = errorOf(() =>
      parseLaunchArguments(['--nproc-per-node', '1', '--nnodes', '2', 'a.js'], {}),
    );
    expect(noPort).toBeInstanceOf(CollectiveError);
    expect(noPort.message).toContain('--master-port');
    const badRank = errorOf(() =>
      parseLaunchArguments(
        ['--nproc-per-node', '1', '--nnodes', '2', '--node-rank', '2', '--master-port', '1', 'a.js'],
        {},
      ),
    );
    expect(badRank.message).toContain('--node-rank 2 is not below --nnodes 2');
    expect(errorOf(() => parseLaunchArguments(['--nproc-per-node', '0', 'a.js'], {})).message).toContain(
      '>= 1',
    );
  });
});

describe('worker environment and command', () => {
  const options = parseLaunchArguments(
    [
      '--nproc-per-node',
      '3',
      '--nnodes',
      '2',
      '--node-rank',
      '1',
      '--master-port',
      '29500',
      '--socket-ifname',
      'eth1',
      'x.js',
    ],
    {},
  );

  it('numbers ranks K × N + local rank and passes the contract, never the secret file', () => {
    const { env } = buildWorkerEnvironment(
      { ...options, script: 'train.js' },
      { FSDP_JOB_SECRET_FILE: '/run/secret', PATH: '/bin' },
      { rank: 5, localRank: 2, attempt: 1, secret: 's'.repeat(32), port: 29500, timeoutMs: 1000 },
    );
    expect(env).toMatchObject({
      RANK: '5',
      WORLD_SIZE: '6',
      LOCAL_RANK: '2',
      LOCAL_WORLD_SIZE: '3',
      FSDP_NODE_RANK: '1',
      MASTER_ADDR: '127.0.0.1',
      MASTER_PORT: '29500',
      FSDP_RESTART_COUNT: '1',
      FSDP_STORE_PREFIX: 'attempt-1/',
      FSDP_AGENT_STORE: '1',
      FSDP_SOCKET_IFNAME: 'eth1',
      PATH: '/bin',
    });
    expect(env.FSDP_JOB_SECRET_FILE).toBeUndefined();
    // No --timeout given: the workers keep their own default op timeout.
    expect(env.FSDP_TIMEOUT_MS).toBeUndefined();
    const timed = parseLaunchArguments(['--nproc-per-node', '1', '--timeout', '7', 'x.js'], {});
    const identity = { rank: 0, localRank: 0, attempt: 0, secret: 's'.repeat(32), port: 1, timeoutMs: 7000 };
    expect(buildWorkerEnvironment(timed, {}, identity).env.FSDP_TIMEOUT_MS).toBe('7000');
  });

  it('runs .ts through tsx, .js with plain node, both with the parent watchdog', () => {
    const typescript = buildWorkerCommand('train.ts', ['--a']);
    expect(typescript).toContain(PARENT_WATCHDOG_IMPORT);
    expect(typescript.some((argument) => argument.includes('tsx'))).toBe(true);
    expect(typescript.at(-1)).toBe('--a');
    const javascript = buildWorkerCommand('train.mjs', []);
    expect(javascript).toEqual(['--import', PARENT_WATCHDOG_IMPORT, expect.stringMatching(/train\.mjs$/)]);
    expect(errorOf(() => buildWorkerCommand('train.py', [])).message).toContain('.js, .mjs, .cjs or .ts');
  });

  it('reports a missing script once, before any rank starts, and accepts an existing one', () => {
    const missing = errorOf(() => checkWorkerScript('nothere.mjs'));
    expect(missing.message).toMatch(/^script not found: \S*nothere\.mjs Fix: pass the path/);
    expect(errorOf(() => checkWorkerScript(import.meta.dirname)).message).toContain('script not found');
    expect(() => checkWorkerScript(fileURLToPath(import.meta.url))).not.toThrow();
  });
});

describe('LinePrefixer', () => {
  it('prefixes every line exactly once however the stream is chunked', () => {
    fc.assert(
      fc.property(
        fc.array(fc.stringMatching(/^[^\n]{0,30}$/), { maxLength: 10 }),
        fc.array(fc.integer({ min: 1, max: 17 }), { minLength: 1, maxLength: 10 }),
        (lines, cuts) => {
          const stream = Buffer.from(lines.map((line) => `${line}\n`).join(''));
          const writes: string[] = [];
          const prefixer = new LinePrefixer('[rank 7] ', (chunk) => writes.push(chunk.toString()));
          let offset = 0;
          for (let index = 0; offset < stream.length; index++) {
            const size = cuts[index % cuts.length]!;
            prefixer.push(stream.subarray(offset, offset + size));
            offset += size;
          }
          prefixer.flush();
          for (const write of writes) expect(write.endsWith('\n')).toBe(true);
          expect(writes.join('')).toBe(lines.map((line) => `[rank 7] ${line}\n`).join(''));
        },
      ),
    );
  });

  it('ends an unterminated last line at flush', () => {
    const writes: string[] = [];
    const prefixer = new LinePrefixer('> ', (chunk) => writes.push(chunk.toString()));
    prefixer.push(Buffer.from('a\nb'));
    prefixer.flush();
    expect(writes).toEqual(['> a\n', '> b\n']);
  });
});
