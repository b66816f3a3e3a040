/**
 * [Note: local peer sockets]: ranks on one host connect over a Unix-domain socket by default,
 * over TCP with FSDP_TCP_LOCAL=tcp, and over TCP when a peer's local socket cannot be reached.
 * Real processes under fsdp-run; each rank reports how many of its connections took each
 * transport (counted where each connection is made or accepted) and checks an all-reduce.
 */
import { describe, expect, it } from 'vitest';
import { localHostIdentity } from '../src/internal/tcp/local-peers.js';
import { runWithLauncher } from './helpers/run-with-launcher.js';

const tcpScript = new URL('./fixtures/tcp-rank.ts', import.meta.url);

interface TransportReport {
  links: { unix: number; tcp: number };
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
