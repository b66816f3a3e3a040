import { createSocket } from 'node:dgram';
import { isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import { CollectiveError } from '../errors.js';

/** What picks the address data sockets bind to: MASTER_ADDR/PORT, FSDP_SOCKET_IFNAME, FSDP_SOCKET_ADDR. */
export interface SocketAddressOptions {
  masterAddr: string;
  masterPort: number;
  /** FSDP_SOCKET_IFNAME: bind to this interface's first IPv4 (else IPv6) address. */
  socketIfname?: string | undefined;
  /** FSDP_SOCKET_ADDR: bind to exactly this address. */
  socketAddr?: string | undefined;
}

/**
 * The address this process's data sockets bind to and advertise to peers (never a wildcard):
 * FSDP_SOCKET_ADDR if set, else the address of FSDP_SOCKET_IFNAME, else loopback when
 * MASTER_ADDR is loopback, else the local address the kernel routes to MASTER_ADDR from (found
 * by connecting a UDP socket, which sends nothing).
 */
export async function resolveSocketAddress(options: SocketAddressOptions): Promise<string> {
  if (options.socketAddr !== undefined && options.socketAddr !== '') {
    if (isIP(options.socketAddr) === 0) {
      throw new CollectiveError(`FSDP_SOCKET_ADDR='${options.socketAddr}' is not an IP address.`, {
        code: 'invalid-argument',
        fix: 'set it to an address of this host, e.g. 10.0.0.5, or unset it.',
      });
    }
    return options.socketAddr;
  }
  if (options.socketIfname !== undefined && options.socketIfname !== '') {
    return interfaceAddress(options.socketIfname);
  }
  if (isLoopback(options.masterAddr)) return isIP(options.masterAddr) === 6 ? '::1' : '127.0.0.1';
  return localAddressRoutingTo(options.masterAddr, options.masterPort);
}

/** Whether a host name or address is this machine's loopback. */
export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\./.test(host);
}

function interfaceAddress(name: string): string {
  const interfaces = networkInterfaces();
  const addresses = interfaces[name];
  if (addresses === undefined || addresses.length === 0) {
    throw new CollectiveError(`FSDP_SOCKET_IFNAME='${name}' is not an interface of this host.`, {
      code: 'invalid-argument',
      expected: Object.keys(interfaces).join(', '),
      actual: name,
      fix: `pick one of: ${Object.keys(interfaces).join(', ')} (see \`ip addr\`).`,
    });
  }
  const ipv4 = addresses.find((address) => address.family === 'IPv4');
  return (ipv4 ?? addresses[0]!).address;
}

/** The local address the kernel would send from to reach host:port (a UDP connect sends nothing). */
export function localAddressRoutingTo(host: string, port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = createSocket(isIP(host) === 6 ? 'udp6' : 'udp4');
    socket.once('error', (cause) => {
      socket.close();
      reject(
        new CollectiveError(`Cannot find the local address that routes to MASTER_ADDR=${host}.`, {
          code: 'invalid-argument',
          cause,
          fix: 'check MASTER_ADDR, or set FSDP_SOCKET_IFNAME / FSDP_SOCKET_ADDR to the interface or address to use.',
        }),
      );
    });
    socket.connect(port, host, () => {
      const address = socket.address().address;
      socket.close();
      resolve(address);
    });
  });
}
