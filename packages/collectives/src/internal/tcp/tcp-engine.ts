import type { OpMessage } from '../op-message.js';

export interface TcpInit {
  backend: 'tcp';
  rank: number;
  size: number;
  key: string;
  secret: string;
  host: string;
  timeoutMs: number;
  abort: Int32Array;
}

export class TcpEngine {
  constructor(
    readonly init: TcpInit,
    readonly notify: (message: unknown) => void,
  ) {}
  run(_op: OpMessage): void {}
  close(): void {}
}
