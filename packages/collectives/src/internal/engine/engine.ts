import type { MainToWorkerMessage, OpMessage } from '../op-message.js';

/** What every backend's worker-side init carries (workerData of the communication worker). */
export interface EngineInit {
  /** The backend's registered name. */
  backend: string;
  rank: number;
  size: number;
  /** Slot 0 becomes 1 when the main thread destroys the group. */
  abort: Int32Array;
  /**
   * The departure word ([Note: process exit] in communication-client.ts): slot 0 is DEPARTING
   * while the main thread waits at process exit, DEPARTED once the worker finished its queue and
   * the engine said goodbye. Set by CommunicationClient.start.
   */
  departure?: Int32Array;
  /**
   * A module exporting `createEngine` for backends registered from outside the package (see
   * backend-registry.ts); built-in backends leave it out and are found by name.
   */
  engineModule?: string;
}

/** What the communication worker gives an engine. */
export interface EngineContext {
  /** Posts a message to the main thread ('listening', 'ready', 'init-failed', ...). */
  notify(message: unknown): void;
}

/** A backend inside the communication worker: runs one op at a time, in issue order. */
export interface Engine {
  run(op: OpMessage): Promise<void>;
  /** Handles a non-op message from the main thread (tcp: the peers' endpoints). */
  control?(message: MainToWorkerMessage): void;
  /** `group.abort(error)` on this rank: tell every peer, then break the group (see [Note: abort]). */
  abort(message: string): void;
  /**
   * The process ends normally and every queued op has run: tell the peers this rank leaves, after
   * every byte it sent ([Note: clean departure] in tcp/peer-link.ts). Optional: shm has no wire.
   */
  depart?(): void | Promise<void>;
  close(): void | Promise<void>;
}

/** What a backend's engine module exports. */
export interface EngineModule {
  createEngine(init: EngineInit, context: EngineContext): Engine;
}
