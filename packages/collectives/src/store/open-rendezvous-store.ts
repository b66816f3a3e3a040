import type { ProcessEnvironment } from '../environment/read-environment.js';
import { connectStore, type StoreClient } from './store-client.js';
import { type StoreServer, startStoreServer } from './store-server.js';

/**
 * The job's rendezvous store as one process sees it: a client, and the server when this process started it.
 */
export interface RendezvousStore {
  /** A client of the job's store, with this attempt's key prefix (FSDP_STORE_PREFIX) applied. */
  store: StoreClient;
  /** The server, when this process started it (rank 0 without a launcher). */
  server: StoreServer | undefined;
  /** Closes the client, then the server if this process runs it. */
  close(): Promise<void>;
}

/**
 * The env:// rendezvous: connects to the store on MASTER_ADDR:MASTER_PORT, first starting it
 * there when this is rank 0 and no launcher runs one (FSDP_AGENT_STORE unset: workers started
 * by srun or a Kubernetes operator). Keys get `environment.storePrefix`, so the attempts of an
 * fsdp-run --max-restarts job never see each other's keys.
 * [Note: store lifetime] When rank 0 runs the store, closing it ends every other rank's store
 * connection: rank 0 should close last (after a barrier), as with torch's TCPStore.
 */
export async function openRendezvousStore(
  environment: ProcessEnvironment,
  options: { timeoutMs?: number } = {},
): Promise<RendezvousStore> {
  const timeoutMs = options.timeoutMs ?? environment.timeoutMs ?? 120_000;
  const server =
    environment.rank === 0 && !environment.agentStore
      ? await startStoreServer({
          host: environment.masterAddr,
          port: environment.masterPort,
          secret: environment.secret,
        })
      : undefined;
  // [Note: process exit] The store this rank hosts does not keep its process alive.
  server?.unref();
  try {
    const store = await connectStore({
      host: environment.masterAddr,
      port: environment.masterPort,
      secret: environment.secret,
      timeoutMs,
      prefix: environment.storePrefix,
    });
    return {
      store,
      server,
      close: async () => {
        await store.close();
        await server?.close();
      },
    };
  } catch (error) {
    await server?.close();
    throw error;
  }
}
