/**
 * [Note: local peer sockets]: ranks on one host connect over a Unix-domain socket by default,
 * over TCP with FSDP_TCP_LOCAL=tcp, and over TCP when a peer's local socket cannot be reached.
 * Real processes under fsdp-run; each rank reports how many of its connections took each
 * transport (counted where each connection is made or accepted) and checks an all-reduce.
 */

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadNativeSockets, resolveNativeSocketsModule } from '../src/internal/tcp/native-sockets.js';
import { localHostIdentity } from '../src/internal/tcp/tcp-connections.js';
import { runWithLauncher } from './helpers/run-with-launcher.js';

const tcpScript = new URL('./fixtures/tcp-rank.ts', import.meta.url);
/** Whether this machine runs the native data path (koffi loads), which sets the send buffers. */
const nativePathLoads = loadNativeSockets(resolveNativeSocketsModule()) !== undefined;

interface TransportReport {
  links: { unix: number; tcp: number };
  /** Smallest and largest SO_SNDBUF of the rank's local links after the request ([Note: local send buffers]). */
  sendBuffer: { smallest: number; largest: number };
  wrong: number;
  smallSum: number;
}

async function transports(
  scenario: string,
  size: number,
  env: Record<string, string> = {},
): Promise<TransportReport[]> {
  const run = await runWithLauncher(size, tcpScript, [scenario], { timeoutMs: 60_000, env });
  expect(run.code, run.output).toBe(0);
  const reports = [...Array(size).keys()].map((rank) => run.results.get(rank) as TransportReport);
  for (const report of reports) {
    expect(report, run.output).toBeDefined();
    expect(report.wrong).toBe(-1);
    expect(report.smallSum).toBe((size * (size + 1)) / 2);
  }
  return reports;
}

describe.runIf(localHostIdentity() !== undefined)('tcp backend: local peer sockets', () => {
  it('W=3: every connection is a Unix-domain socket by default', async () => {
    const reports = await transports('transport', 3);
    for (const report of reports) expect(report.links).toEqual({ unix: 2, tcp: 0 });
  }, 90_000);

  it.runIf(nativePathLoads)(
    'W=2: local links ask for 4 MiB of send buffer; FSDP_TCP_SEND_BUFFER=0 keeps the default',
    async () => {
      // The kernel caps a request at net.core.wmem_max and doubles it; an untouched socket has
      // net.core.wmem_default. Both are read here, so the expectation holds on any kernel setting.
      const wmemMax = Number(readFileSync('/proc/sys/net/core/wmem_max', 'utf8'));
      const wmemDefault = Number(readFileSync('/proc/sys/net/core/wmem_default', 'utf8'));
      const asked = 2 * Math.min(4 * 1024 * 1024, wmemMax);
      for (const report of await transports('transport', 2))
        expect(report.sendBuffer).toEqual({ smallest: asked, largest: asked });
      const doubled = 2 * Math.min(1 << 20, wmemMax);
      for (const report of await transports('transport', 2, { FSDP_TCP_SEND_BUFFER: String(1 << 20) }))
        expect(report.sendBuffer).toEqual({ smallest: doubled, largest: doubled });
      // Nothing asked: the sockets keep wmem_default.
      for (const report of await transports('transport', 2, { FSDP_TCP_SEND_BUFFER: '0' }))
        expect(report.sendBuffer).toEqual({ smallest: wmemDefault, largest: wmemDefault });
    },
    120_000,
  );

  it('a bad FSDP_TCP_SEND_BUFFER fails the start with the setting named', async () => {
    const run = await runWithLauncher(2, tcpScript, ['transport'], {
      timeoutMs: 60_000,
      env: { FSDP_TCP_SEND_BUFFER: '4MiB' },
    });
    expect(run.code).not.toBe(0);
    expect(run.output).toMatch(/FSDP_TCP_SEND_BUFFER is '4MiB'; expected a number of bytes/);
  }, 90_000);

  it('W=3: FSDP_TCP_LOCAL=tcp keeps every connection on TCP', async () => {
    const reports = await transports('transport', 3, { FSDP_TCP_LOCAL: 'tcp' });
    for (const report of reports) expect(report.links).toEqual({ unix: 0, tcp: 2 });
  }, 90_000);

  it('W=3: a peer whose published local name nobody listens on is reached over TCP', async () => {
    // Rank 1 publishes an unreachable name: rank 2 falls back to TCP for it; rank 1 still
    // connects to rank 0's local socket, and rank 2 to rank 0's.
    const reports = await transports('transport-fallback', 3);
    expect(reports.map((report) => report.links)).toEqual([
      { unix: 2, tcp: 0 },
      { unix: 1, tcp: 1 },
      { unix: 1, tcp: 1 },
    ]);
  }, 90_000);

  it('a bad FSDP_TCP_LOCAL fails the start with the setting named', async () => {
    const run = await runWithLauncher(2, tcpScript, ['transport'], {
      timeoutMs: 60_000,
      env: { FSDP_TCP_LOCAL: 'loopback' },
    });
    expect(run.code).not.toBe(0);
    expect(run.output).toMatch(/FSDP_TCP_LOCAL is 'loopback'; expected unix, tcp or unset/);
  }, 90_000);
});
