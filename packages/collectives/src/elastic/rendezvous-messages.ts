/**
 * Messages of the elastic rendezvous, one JSON value each, carried by the job's Store (whose
 * TLS-PSK link encrypts and authenticates them, [Note: store link]). Launcher → server: join,
 * heartbeat, done, failed, leave. Server → launcher: welcome, round, stop, finish, abort.
 *
 * [Note: rendezvous keys] A launcher picks a random id and writes each message to
 * `rendezvous/in/<id>` (a `set`; the server, in the store's process, sees every write in
 * order). The server answers by writing `rendezvous/out/<id>/<n>` for n = 0, 1, ...; the
 * launcher reads them in order with blocking `get`s and deletes each once read. The round's
 * workers use the same Store under `round-N/`.
 *
 * [Note: session token] `welcome` gives each launcher a random token that every later message
 * of that launcher must carry. A message with a wrong token (a forged heartbeat, or a stale
 * launcher reusing an id) is logged and ignored, so it cannot keep a dead host in a round.
 */
export const RENDEZVOUS_KEYS = {
  inbox: 'rendezvous/in/',
  outbox: (id: string, sequence: number) => `rendezvous/out/${id}/${sequence}`,
} as const;

/** One launcher of a round, as every member sees it. */
export interface RoundMember {
  name: string;
  nodeRank: number;
  nproc: number;
  /** Global rank of this node's local rank 0. */
  rankOffset: number;
}

export interface RoundAssignment {
  round: number;
  nodeRank: number;
  nnodes: number;
  worldSize: number;
  rankOffset: number;
  /** Rounds that followed a worker failure with every member back (counted against --max-restarts). */
  restartCount: number;
  members: RoundMember[];
  /** Where the workers of this round find the Store, and the key prefix of this round. */
  store: { host: string; port: number; prefix: string };
}

export type StopReason = 'join' | 'lost' | 'failure';

export type LauncherMessage =
  | { type: 'join'; name: string; nproc: number; token?: string }
  | { type: 'heartbeat'; token: string }
  | { type: 'done'; token: string; round: number }
  | { type: 'failed'; token: string; round: number; message: string }
  | { type: 'leave'; token: string; message: string };

export type ServerMessage =
  | { type: 'welcome'; token: string }
  | ({ type: 'round' } & RoundAssignment)
  | { type: 'stop'; round: number; reason: StopReason; message: string }
  | { type: 'finish' }
  | { type: 'abort'; message: string };

export function encodeMessage(message: LauncherMessage | ServerMessage): Buffer {
  return Buffer.from(JSON.stringify(message));
}

const LAUNCHER_TYPES = new Set(['join', 'heartbeat', 'done', 'failed', 'leave']);
const SERVER_TYPES = new Set(['welcome', 'round', 'stop', 'finish', 'abort']);

function parse(frame: Buffer | undefined, types: Set<string>): { type: string } | undefined {
  if (frame === undefined || frame.length > 1 << 20) return undefined;
  try {
    const value = JSON.parse(frame.toString('utf8')) as unknown;
    if (typeof value !== 'object' || value === null) return undefined;
    const type = (value as { type?: unknown }).type;
    return typeof type === 'string' && types.has(type) ? (value as { type: string }) : undefined;
  } catch {
    return undefined;
  }
}

/** The launcher message in `frame`, or undefined when it is not one (logged by the caller). */
export function decodeLauncherMessage(frame: Buffer | undefined): LauncherMessage | undefined {
  const message = parse(frame, LAUNCHER_TYPES) as LauncherMessage | undefined;
  if (message === undefined) return undefined;
  if (message.type === 'join') {
    const valid = typeof message.name === 'string' && Number.isInteger(message.nproc) && message.nproc > 0;
    return valid ? message : undefined;
  }
  return typeof message.token === 'string' ? message : undefined;
}

export function decodeServerMessage(frame: Buffer | undefined): ServerMessage | undefined {
  return parse(frame, SERVER_TYPES) as ServerMessage | undefined;
}
