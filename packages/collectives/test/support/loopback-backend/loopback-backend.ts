import type { MessagePort } from 'node:worker_threads';
import { CollectiveError } from '../../../src/errors.js';
import type { BackendDefinition } from '../../../src/internal/backend-definition.js';
import { CommunicationClient } from '../../../src/internal/communication-client.js';
import {
  joinShmGroup,
  type ThreadRankContext,
  threadRankContext,
} from '../../../src/internal/shm/thread-rank-context.js';
import type { LoopbackInit } from './loopback-engine.js';

/**
 * A test-only backend that follows CONTRIBUTING.md's "Add a collectives backend" recipe, so the
 * recipe is known to be complete: ranks are threads of one process (spawnThreadRanks), the
 * transport is one MessagePort per pair of ranks, and every payload is copied into a message
 * (no shared memory, unlike shm). Its engine (loopback-engine.ts) is a transport and schedules
 * on top of EngineBase; the conformance suite runs it like the package's own backends.
 */
export const loopbackBackend: BackendDefinition<{ thread: ThreadRankContext | undefined }> = {
  name: 'loopback',

  async configure(_options, identity) {
    const thread = threadRankContext();
    if (identity.size > 1 && thread === undefined) {
      throw new CollectiveError(`The loopback backend with ${identity.size} ranks needs thread ranks.`, {
        code: 'invalid-argument',
        rank: identity.rank,
        fix: 'start the ranks with spawnThreadRanks.',
      });
    }
    return { thread };
  },

  async start(setup) {
    let ports: (MessagePort | null)[] = [null];
    if (setup.config.thread !== undefined) {
      // The spawning thread's broker pairs the ranks up; the control block it also makes is unused.
      const reply = await joinShmGroup(
        setup.config.thread,
        `loopback:${setup.key}`,
        setup.worldRanks,
        setup.timeoutMs,
      );
      ports = reply.ports;
    }
    const init: LoopbackInit = {
      backend: 'loopback',
      rank: setup.rank,
      size: setup.size,
      abort: new Int32Array(new SharedArrayBuffer(4)),
      ports,
    };
    const transfer = ports.filter((port) => port !== null);
    const { client } = await CommunicationClient.start(
      loopbackBackend,
      init,
      transfer,
      'ready',
      setup.timeoutMs,
    );
    client.markReady();
    return client;
  },

  engineModule: new URL('./loopback-engine.ts', import.meta.url),

  abort() {
    // Nothing blocks the worker's thread: closing the ports (the engine's close()) is enough.
  },
};
