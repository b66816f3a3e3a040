import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { resolveJobSecret } from '../src/auth/job-secret.js';
import { readEnvironment, slurmDefaultMasterPort } from '../src/environment/read-environment.js';
import { expandSlurmNodelist } from '../src/environment/slurm-nodelist.js';
import {
  isLoopback,
  localAddressRoutingTo,
  resolveSocketAddress,
} from '../src/environment/socket-address.js';
import { collectiveErrorOf, temporaryDirectory } from './support/fixtures.js';

const SECRET = 'a'.repeat(32);
const torchrun = {
  RANK: '3',
  WORLD_SIZE: '4',
  LOCAL_RANK: '1',
  LOCAL_WORLD_SIZE: '2',
  MASTER_ADDR: '10.0.0.1',
  MASTER_PORT: '29500',
  FSDP_JOB_SECRET: SECRET,
};

describe('expandSlurmNodelist', () => {
  it('expands ranges, lists, padding and plain names', () => {
    expect(expandSlurmNodelist('node[01-04,07],gpu5')).toEqual([
      'node01',
      'node02',
      'node03',
      'node04',
      'node07',
      'gpu5',
    ]);
    expect(expandSlurmNodelist('single')).toEqual(['single']);
    expect(expandSlurmNodelist('a[8-10]')).toEqual(['a8', 'a9', 'a10']);
    expect(expandSlurmNodelist('r[1-2]n[09-10]')).toEqual(['r1n09', 'r1n10', 'r2n09', 'r2n10']);
    expect(expandSlurmNodelist('x[1],y-[3-4].lan')).toEqual(['x1', 'y-3.lan', 'y-4.lan']);
  });

  it('rejects malformed lists naming them', () => {
    for (const bad of ['node[01-04', 'node]1[', 'node[a-b]', 'node[4-1]', '', 'a,,b']) {
      expect(collectiveErrorOf(() => expandSlurmNodelist(bad)).message).toContain('Slurm host list');
    }
  });
});

describe('readEnvironment', () => {
  it('reads the torchrun contract', () => {
    expect(readEnvironment(torchrun)).toMatchObject({
      rank: 3,
      worldSize: 4,
      localRank: 1,
      localWorldSize: 2,
      nodeRank: 1,
      masterAddr: '10.0.0.1',
      masterPort: 29500,
      secret: SECRET,
      restartCount: 0,
      storePrefix: '',
      source: 'torchrun',
    });
  });

  it('reads Slurm variables when RANK and WORLD_SIZE are absent', () => {
    const environment = readEnvironment({
      SLURM_PROCID: '5',
      SLURM_NTASKS: '8',
      SLURM_LOCALID: '1',
      SLURM_TASKS_PER_NODE: '2(x4)',
      SLURM_NODEID: '2',
      SLURM_JOB_NODELIST: 'node[01-04,07],gpu5',
      SLURM_JOB_ID: '123456',
      FSDP_JOB_SECRET: SECRET,
    });
    expect(environment).toMatchObject({
      rank: 5,
      worldSize: 8,
      localRank: 1,
      localWorldSize: 2,
      nodeRank: 2,
      masterAddr: 'node01',
      masterPort: slurmDefaultMasterPort(123456),
      source: 'slurm',
    });
    expect(environment.masterPort).toBe(23456);
    // Uneven nodes: '2(x2),1' puts 1 task on node 2.
    const lastNode = readEnvironment({
      SLURM_PROCID: '4',
      SLURM_NTASKS: '5',
      SLURM_LOCALID: '0',
      SLURM_TASKS_PER_NODE: '2(x2),1',
      SLURM_NODEID: '2',
      SLURM_JOB_NODELIST: 'n[1-3]',
      SLURM_JOB_ID: '7',
      FSDP_JOB_SECRET: SECRET,
    });
    expect(lastNode).toMatchObject({ localWorldSize: 1, nodeRank: 2, masterAddr: 'n1', masterPort: 20007 });
    expect(
      collectiveErrorOf(() =>
        readEnvironment({ SLURM_PROCID: '0', SLURM_NTASKS: '1', SLURM_TASKS_PER_NODE: '2(y3)' }),
      ).message,
    ).toContain('SLURM_TASKS_PER_NODE');
  });

  it('takes a Kubernetes operator environment without LOCAL_RANK as one process per pod', () => {
    const { LOCAL_RANK: _localRank, LOCAL_WORLD_SIZE: _localSize, ...pod } = torchrun;
    expect(readEnvironment(pod)).toMatchObject({ rank: 3, localRank: 0, localWorldSize: 1, nodeRank: 3 });
  });

  it('names the variable and the fix for missing or malformed values', () => {
    expect(collectiveErrorOf(() => readEnvironment({ ...torchrun, RANK: 'two' })).message).toMatch(
      /RANK='two'.*integer/,
    );
    expect(collectiveErrorOf(() => readEnvironment({ ...torchrun, RANK: '4' })).message).toContain(
      'less than the world size 4',
    );
    expect(collectiveErrorOf(() => readEnvironment({ ...torchrun, MASTER_PORT: '70000' })).message).toContain(
      'MASTER_PORT',
    );
    const { MASTER_ADDR: _address, ...noAddress } = torchrun;
    expect(collectiveErrorOf(() => readEnvironment(noAddress)).message).toContain('MASTER_ADDR is not set');
    const { FSDP_JOB_SECRET: _secret, ...noSecret } = torchrun;
    const secretError = collectiveErrorOf(() => readEnvironment(noSecret));
    expect(secretError.code).toBe('auth');
    expect(secretError.message).toContain('FSDP_JOB_SECRET');
    const { LOCAL_WORLD_SIZE: _size, ...noLocalSize } = torchrun;
    expect(collectiveErrorOf(() => readEnvironment(noLocalSize)).message).toContain('LOCAL_WORLD_SIZE');
  });

  it('reads restart count, store prefix and socket settings', () => {
    const environment = readEnvironment({
      ...torchrun,
      FSDP_RESTART_COUNT: '2',
      FSDP_STORE_PREFIX: 'attempt-2/',
      FSDP_SOCKET_IFNAME: 'eth1',
    });
    expect(environment).toMatchObject({ restartCount: 2, storePrefix: 'attempt-2/', socketIfname: 'eth1' });
    expect(environment.socketAddr).toBeUndefined();
  });
});

describe('resolveJobSecret', () => {
  it('reads the secret directly or from a file, and rejects short or ambiguous ones', () => {
    expect(resolveJobSecret({})).toBeUndefined();
    expect(resolveJobSecret({ FSDP_JOB_SECRET: SECRET })).toBe(SECRET);
    const file = join(temporaryDirectory('fsdp-secret-'), 'secret');
    writeFileSync(file, `${SECRET}\n`);
    expect(resolveJobSecret({ FSDP_JOB_SECRET_FILE: file })).toBe(SECRET);
    expect(collectiveErrorOf(() => resolveJobSecret({ FSDP_JOB_SECRET: 'short' })).message).toContain(
      'at least 16',
    );
    expect(
      collectiveErrorOf(() => resolveJobSecret({ FSDP_JOB_SECRET: SECRET, FSDP_JOB_SECRET_FILE: file }))
        .message,
    ).toContain('Both');
    expect(
      collectiveErrorOf(() => resolveJobSecret({ FSDP_JOB_SECRET_FILE: `${file}.missing` })).message,
    ).toContain('Cannot read');
  });
});

describe('resolveSocketAddress', () => {
  it('uses loopback for a loopback master, an explicit address, or the route to the master', async () => {
    expect(isLoopback('127.0.0.1')).toBe(true);
    expect(isLoopback('10.0.0.1')).toBe(false);
    expect(await resolveSocketAddress({ masterAddr: 'localhost', masterPort: 1 })).toBe('127.0.0.1');
    expect(await resolveSocketAddress({ masterAddr: 'x', masterPort: 1, socketAddr: '10.1.2.3' })).toBe(
      '10.1.2.3',
    );
    expect(await resolveSocketAddress({ masterAddr: 'x', masterPort: 1, socketIfname: 'lo' })).toBe(
      '127.0.0.1',
    );
    await expect(
      resolveSocketAddress({ masterAddr: 'x', masterPort: 1, socketIfname: 'nope0' }),
    ).rejects.toThrow(/FSDP_SOCKET_IFNAME='nope0'/);
    // 127.0.0.2 is routed through lo: the kernel picks a loopback source address.
    expect(await localAddressRoutingTo('127.0.0.2', 9)).toMatch(/^127\./);
  });
});

describe('initProcessGroup reads the torchrun variables strictly', () => {
  it('a RANK or WORLD_SIZE that is not a whole number is named, not read as rank NaN', async () => {
    const { initProcessGroup } = await import('../src/init-process-group.js');
    const saved = { RANK: process.env.RANK, WORLD_SIZE: process.env.WORLD_SIZE };
    try {
      process.env.RANK = 'two';
      process.env.WORLD_SIZE = '2';
      await expect(initProcessGroup()).rejects.toThrow("RANK='two' is malformed; expected an integer >= 0");
      process.env.RANK = '0';
      process.env.WORLD_SIZE = '2.5';
      await expect(initProcessGroup()).rejects.toThrow(
        "WORLD_SIZE='2.5' is malformed; expected an integer >= 1",
      );
    } finally {
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });
});
