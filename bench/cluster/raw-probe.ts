/**
 * The raw-socket peer of bench/cluster: what a shaped link really carries, measured with plain TCP
 * between the two namespace hosts, both directions at once (as a ring's links are used).
 *   node raw-probe.ts serve <address> <port> <bytes>     (host 1; accepts one connection)
 *   node raw-probe.ts connect <address> <port> <bytes>   (host 0)
 * Each side sends `bytes` and receives `bytes`, then prints one JSON line: the seconds from the
 * connection to the last byte received, and the rate per direction in bytes per second.
 */
import { createConnection, createServer, type Socket } from 'node:net';

const [mode, address, portText, bytesText] = process.argv.slice(2);
const port = Number(portText);
const bytes = Number(bytesText);
if ((mode !== 'serve' && mode !== 'connect') || address === undefined || !(bytes > 0))
  throw new Error(
    `usage: raw-probe.ts serve|connect <address> <port> <bytes>; got ${process.argv.slice(2).join(' ')}`,
  );

function exchange(socket: Socket): void {
  socket.setNoDelay(true);
  const started = performance.now();
  const chunk = Buffer.alloc(1 << 20, 7);
  let sent = 0;
  let received = 0;
  // Half-closes only when this side has written everything and read everything.
  const finishIfDone = () => {
    if (sent === bytes && received >= bytes) socket.end();
  };
  const send = () => {
    while (sent < bytes) {
      const piece = chunk.subarray(0, Math.min(chunk.length, bytes - sent));
      sent += piece.length;
      if (!socket.write(piece)) return void socket.once('drain', send);
    }
    finishIfDone();
  };
  socket.on('data', (data: Buffer) => {
    const before = received;
    received += data.length;
    if (before < bytes && received >= bytes) {
      const seconds = (performance.now() - started) / 1000;
      process.stdout.write(`${JSON.stringify({ seconds, bytesPerSecond: bytes / seconds })}\n`);
    }
    finishIfDone();
  });
  socket.on('close', () => process.exit(0));
  send();
}

if (mode === 'serve') {
  const server = createServer((socket) => {
    server.close();
    exchange(socket);
  });
  server.listen(port, address, () => process.stderr.write('listening\n'));
} else {
  // The server may still be starting in the other namespace: retry a refused connection for 60 s.
  const deadline = Date.now() + 60_000;
  const connect = () => {
    const socket = createConnection({ host: address, port }, () => exchange(socket));
    socket.once('error', (error: NodeJS.ErrnoException) => {
      if (error.code !== 'ECONNREFUSED' || Date.now() > deadline) throw error;
      setTimeout(connect, 100);
    });
  };
  connect();
}
