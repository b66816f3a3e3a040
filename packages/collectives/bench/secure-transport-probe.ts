/**
 * `npm run bench:secure-probe`: the measurement behind architecture/decisions/
 * 2026-12-01-secure-data-path.md. Two processes on loopback, one authenticated connection per
 * transport, 256 MiB sent one way in 1 MiB writes; transports interleaved (plain, tls-psk,
 * aes-gcm-js, plain, ...) for 5 rounds (PROBE_ROUNDS). `tls-psk` is what `secure: true` uses (node:tls, TLS 1.2,
 * PSK-AES256-GCM-SHA384); `aes-gcm-js` seals 1 MiB frames with node:crypto in JavaScript
 * (SecureChannel, the Store's framing). Prints GB/s and the ratio to plain with the load average.
 */
import { fork } from 'node:child_process';
import { connect, createServer, type Socket } from 'node:net';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { authenticateSocket, type SessionKeys } from '../src/auth/authenticate-socket.js';
import { secureSocket } from '../src/auth/secure-socket.js';
import { SealedStream } from './internal/sealed-stream.js';

type Transport = 'plain' | 'tls-psk' | 'sealed-stream';
const TRANSPORTS: Transport[] = ['plain', 'tls-psk', 'sealed-stream'];
const MiB = 1 << 20;
const TOTAL = 256 * MiB;
const ROUNDS = Number(process.env.PROBE_ROUNDS ?? 5);
const SECRET = 'secure-transport-probe';

async function prepare(
  socket: Socket,
  transport: Transport,
  role: 'server' | 'client',
): Promise<{ socket: Socket; keys: SessionKeys }> {
  socket.setNoDelay(true);
  const keys = await authenticateSocket(socket, SECRET, role);
  if (transport !== 'tls-psk') return { socket, keys };
  if (role === 'client') await new Promise((resolve) => socket.once('readable', resolve));
  else socket.write(Buffer.of(1));
  if (role === 'client') socket.read(1);
  const secured = await secureSocket(socket, {
    keys,
    role,
    identity: 'probe',
    deadline: Date.now() + 10_000,
  });
  return { socket: secured, keys };
}

/** Receiving side: returns GB/s from the go byte to the last payload byte. */
async function receive(raw: Socket, transport: Transport): Promise<number> {
  const { socket, keys } = await prepare(raw, transport, 'server');
  const stream = new SealedStream(keys);
  let received = 0;
  const start = performance.now();
  await new Promise<void>((resolve) => {
    socket.on('data', (chunk: Buffer) => {
      if (transport === 'sealed-stream') {
        for (const plaintext of stream.open(chunk)) received += plaintext.length;
      } else received += chunk.length;
      if (received === TOTAL) resolve();
    });
    socket.resume();
    socket.write(Buffer.of(0x67));
  });
  const seconds = (performance.now() - start) / 1000;
  socket.destroy();
  return TOTAL / seconds / 1e9;
}

async function send(port: number, transport: Transport): Promise<void> {
  const raw = await new Promise<Socket>((resolve) => {
    const socket = connect({ host: '127.0.0.1', port }, () => resolve(socket));
  });
  const { socket, keys } = await prepare(raw, transport, 'client');
  const stream = new SealedStream(keys);
  const payload = Buffer.alloc(MiB, 0x5a);
  await new Promise((resolve) => {
    socket.once('data', resolve);
    socket.resume();
  });
  for (let sent = 0; sent < TOTAL; sent += MiB) {
    const pieces = transport === 'sealed-stream' ? stream.seal(payload) : [payload];
    socket.cork();
    let room = true;
    for (const piece of pieces) room = socket.write(piece);
    socket.uncork();
    if (!room) await new Promise((resolve) => socket.once('drain', resolve));
  }
  await new Promise((resolve) => socket.once('close', resolve));
}

if (process.argv[2] === '--sender') {
  const port = Number(process.argv[3]);
  for (let round = 0; round < ROUNDS; round++)
    for (const transport of TRANSPORTS) await send(port, transport);
  process.exit(0);
}

const server = createServer();
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const address = server.address();
const port = typeof address === 'object' && address !== null ? address.port : 0;
const connections: Socket[] = [];
let waiting: ((socket: Socket) => void) | undefined;
server.on('connection', (socket) => {
  if (waiting !== undefined) {
    waiting(socket);
    waiting = undefined;
  } else connections.push(socket);
});
const nextConnection = () =>
  connections.length > 0
    ? Promise.resolve(connections.shift()!)
    : new Promise<Socket>((resolve) => {
        waiting = resolve;
      });
const load = () =>
  loadavg()
    .map((value) => value.toFixed(1))
    .join(' ');
console.log(`secure transport probe: 256 MiB one way, 1 MiB writes, 2 processes on loopback; load ${load()}`);
const sender = fork(fileURLToPath(import.meta.url), ['--sender', String(port)], {
  execArgv: process.execArgv,
});
const rates = new Map<Transport, number[]>(TRANSPORTS.map((transport) => [transport, []]));
for (let round = 0; round < ROUNDS; round++) {
  for (const transport of TRANSPORTS) {
    const rate = await receive(await nextConnection(), transport);
    rates.get(transport)!.push(rate);
    console.log(`  round ${round} ${transport.padEnd(11)} ${rate.toFixed(3)} GB/s`);
  }
}
await new Promise((resolve) => sender.once('exit', resolve));
server.close();
const plain = rates.get('plain')!;
for (const transport of TRANSPORTS) {
  const values = rates.get(transport)!;
  const ratios = values.map((value, index) => value / plain[index]!);
  const median = (list: number[]) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)]!;
  console.log(
    `${transport.padEnd(11)} median ${median(values).toFixed(3)} GB/s, per-round ratio to plain ${ratios.map((ratio) => ratio.toFixed(2)).join(' / ')} (median ${median(ratios).toFixed(2)}x)`,
  );
}
console.log(`load after: ${load()}`);
