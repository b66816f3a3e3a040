import type { InitProcessGroupOptions } from '../init-process-group.js';
import type { CommunicationClient } from './communication-client.js';
import type { EngineInit, EngineModule } from './engine/engine-base.js';

/** What every group has, whatever its backend. */
export interface GroupIdentity {
  backend: string;
  rank: number;
  size: number;
  /** Unique name of the group (store key prefix, broker key). */
  key: string;
  /** World rank of each group rank. */
  worldRanks: number[];
  timeoutMs: number;
}

/** Identity and backend settings (resolved once for the world, inherited by sub-groups). */
export interface GroupSetup<Config = unknown> extends GroupIdentity {
  config: Config;
}

/** Closed with the world group (the store's client and server). */
export interface OwnedResource {
  close(): Promise<void>;
}

/**
 * [Note: backend definition] A collectives backend, registered in backend-registry.ts. The main
 * thread uses `configure` and `start`; the communication worker imports the engine (`loadEngine`
 * for backends inside this package, `engineModule` for backends registered from outside), whose
 * engine extends EngineBase ([Note: engine base]) and so implements only its transport and its
 * schedules. CONTRIBUTING.md "Add a collectives backend" is the checklist.
 */
export interface BackendDefinition<Config = unknown> {
  readonly name: string;
  /**
   * Resolves this backend's settings for a world group from the options and the environment,
   * once (sub-groups inherit them). Resources it opens go into `owned`; the group closes them.
   * Throws a CollectiveError (code 'invalid-argument') for what this backend cannot run with.
   */
  configure(
    options: InitProcessGroupOptions,
    identity: GroupIdentity,
    owned: OwnedResource[],
  ): Promise<Config>;
  /** Starts the group's communication worker; resolves once every peer is connected. */
  start(setup: GroupSetup<Config>): Promise<CommunicationClient>;
  /** Imported inside the communication worker (backends of this package). */
  loadEngine?: () => Promise<EngineModule>;
  /** A module exporting `createEngine` (backends registered from outside). */
  engineModule?: URL;
  /** Wakes a worker blocked in the transport after destroy set `init.abort[0]` (shm: a doorbell). */
  abort(init: EngineInit): void;
}
