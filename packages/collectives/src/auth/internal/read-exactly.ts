import type { Socket } from 'node:net';
import { CollectiveError } from '../../errors.js';

/**
 * Reads exactly `length` bytes from a socket and nothing more, failing at `deadline` (ms since
 * epoch) or when the connection ends first.
 *
 * [Note: exact reads] The handshake must not consume bytes that follow it (the first frame of
 * the protocol running over the socket). `socket.read(length)` in paused mode returns either
 * `length` bytes or null and leaves the rest buffered, so the next consumer sees every byte.
 */
export function readExactly(socket: Socket, length: number, deadline: number, what: string): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const finish = (error: Error | undefined, data?: Buffer) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.off('readable', onReadable);
      socket.off('end', onEnd);
      socket.off('close', onEnd);
      socket.off('error', onError);
      if (error !== undefined) reject(error);
      else resolve(data!);
    };
    const onReadable = () => {
      const data = socket.read(length) as Buffer | null;
      if (data !== null) {
        if (data.length === length) finish(undefined, data);
        else finish(closedError(what));
      }
    };
    const onEnd = () => finish(closedError(what));
    const onError = (cause: Error) =>
      finish(new CollectiveError(`Socket error while reading ${what}.`, { code: 'auth', cause }));
    const timer = setTimeout(
      () =>
        finish(
          new CollectiveError(`Timed out reading ${what}: the peer sent too little before the deadline.`, {
            code: 'timeout',
            fix: 'check that the peer runs fsdp-ts with the same protocol version and is not stalled.',
          }),
        ),
      Math.max(0, deadline - Date.now()),
    );
    socket.on('readable', onReadable);
    socket.on('end', onEnd);
    socket.on('close', onEnd);
    socket.on('error', onError);
    onReadable();
  });
}

function closedError(what: string): CollectiveError {
  return new CollectiveError(`The connection closed while reading ${what}.`, {
    code: 'auth',
    fix: 'the peer refused the connection or died; check that both sides use the same job secret.',
  });
}
