import { CollectiveError } from '../../errors.js';
import type { StoreRequest, StoreResponse } from '../store-protocol.js';

/** One authenticated connection as the store state sees it. */
export interface StoreClientHandle {
  respond(response: StoreResponse): void;
  /** Keys set to a value when this connection closes (see `setOnDisconnect`). */
  onDisconnect: Map<string, Uint8Array>;
}

interface Waiter {
  client: StoreClientHandle;
  id: number;
  op: 'get' | 'wait';
  keys: string[];
  timer: NodeJS.Timeout;
}

const EMPTY = new Uint8Array(0);

/**
 * The store's data and its waiting requests, independent of sockets.
 * [Note: store waits] A get or wait on missing keys parks a Waiter; every write re-checks the
 * waiters of the written key; the server-side timer answers 'timeout' naming the missing keys.
 */
export class StoreState {
  private readonly values = new Map<string, Uint8Array>();
  private readonly waiters = new Set<Waiter>();
  private readonly watchers: { prefix: string; listener: (key: string, value: Uint8Array) => void }[] = [];

  /** Calls `listener` on every later write to a key under `prefix` (see StoreServer.local). */
  watch(prefix: string, listener: (key: string, value: Uint8Array) => void): void {
    this.watchers.push({ prefix, listener });
  }

  /** Deletes `key` as a client's `delete` does. */
  erase(key: string): void {
    this.values.delete(key);
  }

  /** Sets `key` as a client's `set` does. */
  put(key: string, value: Uint8Array): void {
    this.write(key, value);
  }

  connect(respond: (response: StoreResponse) => void): StoreClientHandle {
    return { respond, onDisconnect: new Map() };
  }

  disconnect(client: StoreClientHandle): void {
    for (const waiter of this.waiters) {
      if (waiter.client === client) this.dropWaiter(waiter);
    }
    for (const [key, value] of client.onDisconnect) this.write(key, value);
    client.onDisconnect.clear();
  }

  closeAll(): void {
    for (const waiter of this.waiters) this.dropWaiter(waiter);
  }

  handle(client: StoreClientHandle, request: StoreRequest): void {
    const response = this.answer(client, request);
    if (response !== undefined) client.respond(response);
  }

  /** The immediate response to a request, or undefined when it waits (answered later). */
  private answer(client: StoreClientHandle, request: StoreRequest): StoreResponse | undefined {
    const ok = (value: Uint8Array): StoreResponse => ({ status: 'ok', id: request.id, value });
    switch (request.op) {
      case 'set':
        this.write(request.key, request.value);
        return ok(EMPTY);
      case 'get':
      case 'wait': {
        const keys = request.op === 'get' ? [request.key] : request.keys;
        const waiter: Waiter = {
          client,
          id: request.id,
          op: request.op,
          keys,
          timer: setTimeout(
            () => this.timeOut(waiter, request.timeoutMs),
            Math.min(request.timeoutMs, 2 ** 31 - 1),
          ),
        };
        this.waiters.add(waiter);
        this.tryAnswer(waiter);
        return undefined;
      }
      case 'check':
        return ok(Uint8Array.of(request.keys.every((key) => this.values.has(key)) ? 1 : 0));
      case 'add': {
        const current = this.values.get(request.key);
        const text = current === undefined ? '0' : Buffer.from(current).toString('utf8');
        if (!/^-?\d+$/.test(text) || !Number.isSafeInteger(Number(text) + request.delta)) {
          return {
            status: 'error',
            id: request.id,
            code: 'store',
            message: `Store add on key '${request.key}': the value '${text.slice(0, 40)}' is not an integer, or the sum overflows. Fix: use add only on keys that only add writes.`,
          };
        }
        const sum = Number(text) + request.delta;
        this.write(request.key, Buffer.from(String(sum), 'utf8'));
        const result = Buffer.alloc(8);
        result.writeDoubleBE(sum, 0);
        return ok(result);
      }
      case 'compareSet': {
        const current = this.values.get(request.key);
        const matches =
          current === undefined
            ? request.expected.length === 0
            : Buffer.from(current).equals(Buffer.from(request.expected));
        if (matches) this.write(request.key, request.desired);
        return ok(this.values.get(request.key) ?? EMPTY);
      }
      case 'delete':
        return ok(Uint8Array.of(this.values.delete(request.key) ? 1 : 0));
      case 'setOnDisconnect':
        client.onDisconnect.set(request.key, request.value);
        return ok(EMPTY);
      case 'clearOnDisconnect':
        client.onDisconnect.delete(request.key);
        return ok(EMPTY);
    }
  }

  private write(key: string, value: Uint8Array): void {
    this.values.set(key, value);
    for (const { prefix, listener } of this.watchers) if (key.startsWith(prefix)) listener(key, value);
    for (const waiter of this.waiters) {
      if (waiter.keys.includes(key)) this.tryAnswer(waiter);
    }
  }

  private tryAnswer(waiter: Waiter): void {
    if (!waiter.keys.every((key) => this.values.has(key))) return;
    this.dropWaiter(waiter);
    const value = waiter.op === 'get' ? this.values.get(waiter.keys[0]!)! : EMPTY;
    waiter.client.respond({ status: 'ok', id: waiter.id, value });
  }

  private timeOut(waiter: Waiter, timeoutMs: number): void {
    this.dropWaiter(waiter);
    const missing = waiter.keys.filter((key) => !this.values.has(key));
    const error = new CollectiveError(
      `Store ${waiter.op} timed out after ${timeoutMs} ms waiting for key${missing.length === 1 ? '' : 's'} ${formatKeys(missing)}.`,
      {
        code: 'timeout',
        op: `store.${waiter.op}`,
        fix: 'check that every rank started and reached the same point, or raise the timeout.',
      },
    );
    waiter.client.respond({ status: 'error', id: waiter.id, code: 'timeout', message: error.message });
  }

  private dropWaiter(waiter: Waiter): void {
    clearTimeout(waiter.timer);
    this.waiters.delete(waiter);
  }
}

function formatKeys(keys: readonly string[]): string {
  const shown = keys.slice(0, 8).map((key) => `'${key}'`);
  return keys.length > 8 ? `${shown.join(', ')} and ${keys.length - 8} more` : shown.join(', ');
}
