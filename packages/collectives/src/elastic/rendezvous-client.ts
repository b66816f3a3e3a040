import { randomBytes } from 'node:crypto';
import { Dealer } from 'zeromq';
import { CollectiveError } from '../errors.js';
import { deriveRendezvousKeys } from './curve-keys.js';
import {
  decodeServerMessage,
  encodeMessage,
  type LauncherMessage,
  type ServerMessage,
} from './rendezvous-messages.js';
import { SerialSender } from './serial-sender.js';

export interface RendezvousClientOptions {
  host: string;
  port: number;
  secret: string;
  /** How logs and errors name this launcher. */
  name: string;
  nproc: number;
  /** The server is lost after this long without a message (heartbeats are sent 5 times as often). */
  heartbeatTimeoutMs: number;
  /** How long the first answer may take (the master host's launcher may start later). */
  connectTimeoutMs: number;
}

/** What the launcher acts on: a round to run, a stop, or the job's verdict. */
export type RendezvousEvent = Extract<ServerMessage, { type: 'round' | 'stop' | 'finish' | 'abort' }>;

/**
 * One launcher's DEALER to the rendezvous server: joins, sends heartbeats, reports its workers'
 * outcome and hands the server's decisions to the launcher in order (`next()`). `lost` resolves
 * when the server stops answering or refuses this launcher's CURVE handshake (a different job
 * secret): both end the job on this host.
 */
export class RendezvousClient {
  private readonly socket: Dealer;
  private readonly sender: SerialSender;
  private token: string | undefined;
  private lastHeard = performance.now();
  private readonly events: RendezvousEvent[] = [];
  private waiter: ((event: RendezvousEvent) => void) | undefined;
  private readonly heartbeat: NodeJS.Timeout;
  private handshakes = 0;
  private resolveLost!: (error: CollectiveError) => void;
  /** Resolves (never rejects) when the rendezvous is unreachable or refused this launcher. */
  readonly lost: Promise<CollectiveError>;

  constructor(private readonly options: RendezvousClientOptions) {
    const keys = deriveRendezvousKeys(options.secret);
    this.socket = new Dealer({
      curveServerKey: keys.server.publicKey,
      curvePublicKey: keys.client.publicKey,
      curveSecretKey: keys.client.secretKey,
      routingId: randomBytes(8).toString('hex'),
      linger: 2_000,
      heartbeatInterval: Math.max(100, Math.round(options.heartbeatTimeoutMs / 5)),
      heartbeatTimeout: options.heartbeatTimeoutMs,
    });
    this.sender = new SerialSender(this.socket);
    this.lost = new Promise((resolve) => (this.resolveLost = resolve));
    this.socket.events.on('handshake', () => this.handshakes++);
    this.socket.events.on('handshake:error:other', () => this.refused());
    this.socket.events.on('handshake:error:protocol', () => this.refused());
    this.socket.connect(`tcp://${options.host}:${options.port}`);
    this.heartbeat = setInterval(() => this.beat(), Math.max(50, options.heartbeatTimeoutMs / 5));
    this.heartbeat.unref();
    void this.receive();
    this.send({ type: 'join', name: options.name, nproc: options.nproc });
  }

  /** The next decision of the server, in order. */
  next(): Promise<RendezvousEvent> {
    const queued = this.events.shift();
    if (queued !== undefined) return Promise.resolve(queued);
    return new Promise((resolve) => (this.waiter = resolve));
  }

  /** Joins the next round (after this launcher's workers of the last one have stopped). */
  rejoin(): void {
    if (this.token !== undefined)
      this.send({ type: 'join', name: this.options.name, nproc: this.options.nproc, token: this.token });
  }

  done(round: number): void {
    if (this.token !== undefined) this.send({ type: 'done', token: this.token, round });
  }

  failed(round: number, message: string): void {
    if (this.token !== undefined) this.send({ type: 'failed', token: this.token, round, message });
  }

  leave(message: string): void {
    if (this.token !== undefined) this.send({ type: 'leave', token: this.token, message });
  }

  /** Stops heartbeats, lets queued messages leave (bounded) and closes the socket. */
  async close(): Promise<void> {
    clearInterval(this.heartbeat);
    await this.sender.drain(2_000);
    this.socket.close();
  }

  private send(message: LauncherMessage): void {
    void this.sender.send(encodeMessage(message));
  }

  private beat(): void {
    const silentMs = performance.now() - this.lastHeard;
    const limit = this.token === undefined ? this.options.connectTimeoutMs : this.options.heartbeatTimeoutMs;
    const { host, port } = this.options;
    if (silentMs > limit) {
      clearInterval(this.heartbeat);
      this.resolveLost(
        new CollectiveError(
          `The rendezvous at ${host}:${port} did not answer for ${Math.round(silentMs)} ms.`,
          {
            code: 'timeout',
            fix: 'check that the launcher of the master host runs and is reachable at --master-addr/--master-port.',
          },
        ),
      );
      return;
    }
    if (this.token !== undefined) this.send({ type: 'heartbeat', token: this.token });
  }

  private refused(): void {
    // A handshake that fails before any succeeded means the server does not accept our keys.
    if (this.handshakes > 0) return;
    clearInterval(this.heartbeat);
    const { host, port } = this.options;
    this.resolveLost(
      new CollectiveError(`The rendezvous at ${host}:${port} refused this launcher's CURVE handshake.`, {
        code: 'auth',
        fix: 'use the same FSDP_JOB_SECRET (or FSDP_JOB_SECRET_FILE) on every host of the job.',
      }),
    );
  }

  private async receive(): Promise<void> {
    try {
      for await (const [frame] of this.socket) {
        const message = decodeServerMessage(frame);
        if (message === undefined) continue;
        this.lastHeard = performance.now();
        if (message.type === 'welcome') this.token = message.token;
        else if (message.type !== 'ack') this.deliver(message);
      }
    } catch {
      // The socket closed.
    }
  }

  private deliver(event: RendezvousEvent): void {
    const waiter = this.waiter;
    this.waiter = undefined;
    if (waiter !== undefined) waiter(event);
    else this.events.push(event);
  }
}
