import { readEnvironment } from '../../environment/read-environment.js';
import { resolveSocketAddress } from '../../environment/socket-address.js';
import { CollectiveError } from '../../errors.js';
import { openRendezvousStore } from '../../store/open-rendezvous-store.js';
import type { Store } from '../../store/store.js';
import type { BackendDefinition, GroupSetup } from '../backend-definition.js';
import { CommunicationClient } from '../communication-client.js';
import type { EngineInit } from '../engine/engine-base.js';
import { blasSetting } from './native-blas.js';
import {
  type NativeSwitch,
  nativeSetting,
  resolveNativeSocketsModule,
  sendBufferSetting,
} from './native-sockets.js';
import {
  formatEndpoint,
  localHostIdentity,
  localPublishing,
  localTransportSetting,
  newLocalName,
  tcpCounters,
} from './tcp-connections.js';

/** The tcp backend's settings: how ranks find each other and authenticate. */
export interface TcpConfig {
  /** The rendezvous store; undefined for a group of one. */
  store: Store | undefined;
  /** The job secret the data sockets authenticate with. */
  secret: string;
  /** Address this rank's data sockets listen on and peers connect to. */
  host: string;
  /** TLS on every data connection ([Note: secure data links]). */
  secure: boolean;
}

/** tcp: processes on one or several hosts, a full mesh formed through the store ([Note: tcp mesh]). */
export const tcpBackend: BackendDefinition<TcpConfig> = {
  name: 'tcp',

  async configure(options, identity, owned) {
    let store = options.store;
    let secret = options.secret ?? process.env.FSDP_JOB_SECRET;
    let host = options.host ?? '127.0.0.1';
    if (identity.size > 1 && store === undefined) {
      // env://: the store at MASTER_ADDR:MASTER_PORT, the job secret, the data address.
      const environment = readEnvironment();
      if (environment.worldSize !== identity.size || environment.rank !== identity.rank) {
        throw new CollectiveError(
          `initProcessGroup: rank ${identity.rank} of ${identity.size} disagrees with the environment (rank ${environment.rank} of ${environment.worldSize}).`,
          {
            code: 'invalid-argument',
            rank: identity.rank,
            fix: 'pass an explicit store with explicit rank and size, or neither.',
          },
        );
      }
      identity.timeoutMs = options.timeoutMs ?? environment.timeoutMs ?? identity.timeoutMs;
      secret = options.secret ?? environment.secret;
      host =
        options.host ??
        (await resolveSocketAddress({
          masterAddr: environment.masterAddr,
          masterPort: environment.masterPort,
          socketIfname: environment.socketIfname,
          socketAddr: environment.socketAddr,
        }));
      const rendezvous = await openRendezvousStore(
        { ...environment, secret },
        { timeoutMs: identity.timeoutMs },
      );
      owned.push(rendezvous);
      store = rendezvous.store;
    }
    if (identity.size > 1 && (store === undefined || secret === undefined)) {
      throw new CollectiveError(
        `The tcp backend with ${identity.size} ranks needs a store and a job secret.`,
        {
          code: 'invalid-argument',
          rank: identity.rank,
          expected: 'store and secret',
          actual: { store: store !== undefined, secret: secret !== undefined },
          fix: 'run under fsdp-run (which sets MASTER_ADDR, MASTER_PORT and FSDP_JOB_SECRET), or pass { store, secret }.',
        },
      );
    }
    return { store, secret: secret ?? '', host, secure: resolveSecure(options.secure, identity.rank) };
  },

  async start(setup) {
    const abort = new Int32Array(new SharedArrayBuffer(4));
    const init: TcpInit = {
      backend: 'tcp',
      rank: setup.rank,
      size: setup.size,
      key: setup.key,
      secret: setup.config.secret,
      host: setup.config.host,
      timeoutMs: setup.timeoutMs,
      secure: setup.config.secure,
      abort,
      counters: tcpCounters(),
    };
    // [Note: local peer sockets]: ranks on this host and network namespace connect locally.
    const localIdentity = localTransportSetting(setup.rank) === 'unix' ? localHostIdentity() : undefined;
    if (localIdentity !== undefined && setup.size > 1) {
      init.localIdentity = localIdentity;
      init.localName = newLocalName();
    }
    init.sendBufferBytes = sendBufferSetting(setup.rank);
    const nativeSockets = resolveNativeSocketsModule(setup.rank);
    if (nativeSockets !== undefined) {
      init.nativeSockets = nativeSockets;
      init.nativeRequired = nativeSetting(setup.rank) === 'required';
      init.blas = blasSetting(setup.rank);
    }
    const { client, reply } = await CommunicationClient.start(
      tcpBackend,
      init,
      [],
      'listening',
      setup.timeoutMs,
    );
    try {
      const localName = localPublishing.unreachableName ?? reply.localName;
      const endpoints = await exchangeEndpoints(
        setup,
        formatEndpoint(
          `${setup.config.host}:${reply.port}`,
          localName === undefined || localIdentity === undefined
            ? undefined
            : { name: localName, identity: localIdentity },
        ),
      );
      const ready = client.expect('ready', setup.timeoutMs);
      client.post({ type: 'connect', endpoints });
      await ready;
      client.markReady();
      return client;
    } catch (error) {
      await client.destroy();
      throw error;
    }
  },

  loadEngine: () => import('./tcp-engine.js'),

  abort() {
    // The worker's close() wakes everything.
  },
};

/** Every rank's data endpoint through the store ('' for this rank). */
async function exchangeEndpoints(setup: GroupSetup<TcpConfig>, mine: string): Promise<string[]> {
  const endpoints: string[] = [];
  if (setup.size === 1) return endpoints;
  const store = setup.config.store!;
  await store.set(`${setup.key}/endpoint/${setup.rank}`, mine);
  const decoder = new TextDecoder();
  for (let peer = 0; peer < setup.size; peer++) {
    endpoints.push(
      peer === setup.rank
        ? ''
        : decoder.decode(await store.get(`${setup.key}/endpoint/${peer}`, { timeoutMs: setup.timeoutMs })),
    );
  }
  return endpoints;
}

/** `secure` from the options, else FSDP_SECURE ('1'/'true' on, '0'/'false'/unset off). */
function resolveSecure(option: boolean | undefined, rank: number): boolean {
  if (option !== undefined) return option;
  const value = process.env.FSDP_SECURE;
  if (value === undefined || value === '' || value === '0' || value === 'false') return false;
  if (value === '1' || value === 'true') return true;
  throw new CollectiveError(`FSDP_SECURE is '${value}'; expected 1 or 0.`, {
    code: 'invalid-argument',
    rank,
    expected: "'1', 'true', '0', 'false' or unset",
    actual: value,
    fix: 'set FSDP_SECURE=1 to encrypt the data connections (or run fsdp-run --secure), or unset it.',
  });
}

export interface TcpInit extends EngineInit {
  backend: 'tcp';
  key: string;
  secret: string;
  host: string;
  timeoutMs: number;
  /** TLS on every data connection ([Note: secure data links]). */
  secure: boolean;
  /** Where koffi is, for the native data path; undefined: node:net only. */
  nativeSockets?: string;
  /** FSDP_TCP_NATIVE=1. */
  nativeRequired?: boolean;
  /** FSDP_TCP_BLAS ([Note: blas reduce steps]). */
  blas?: NativeSwitch;
  /** Abstract socket to listen on too ([Note: local peer sockets]). */
  localName?: string;
  localIdentity?: string;
  /** tcpCounters, shared with the main thread. */
  counters?: Int32Array;
  /** FSDP_TCP_SEND_BUFFER ([Note: local send buffers]). */
  sendBufferBytes?: number;
}
