import type { EngineInit } from '../engine/engine.js';
import type { BlasSetting } from './native-blas.js';

/** What a tcp engine starts with: the group's setup as the tcp backend resolved it (tcp-backend.ts). */
export interface TcpInit extends EngineInit {
  backend: 'tcp';
  key: string;
  secret: string;
  host: string;
  timeoutMs: number;
  /** TLS on every data connection ([Note: secure data links]). */
  secure: boolean;
  /**
   * Where koffi is installed, for the native data path ([Note: native data path]); undefined to
   * move every byte through node:net.
   */
  nativeSockets?: string;
  /** FSDP_TCP_NATIVE=1: fail the group's start when the native path cannot load. */
  nativeRequired?: boolean;
  /**
   * FSDP_TCP_BLAS ([Note: blas reduce steps]): 'auto' adds float32 sums with OpenBLAS on the
   * native path when it loads, 'required' fails the group's start when it cannot, 'off' never.
   */
  blas?: BlasSetting;
  /** Reduce steps by path, shared with the main thread (blasReduceCounts). */
  reduceCounts?: Int32Array;
  /** Native header exchanges and their mismatches, shared with the main thread (nativeHeaderCounts). */
  headerCounts?: Int32Array;
  /** The abstract socket name to listen on too ([Note: local peer sockets]); none for TCP only. */
  localName?: string;
  /** This host's identity, matched against the peers' published ones. */
  localIdentity?: string;
  /** Connections by transport, shared with the main thread (localLinkCounts). */
  linkCounts?: Int32Array;
  /** FSDP_TCP_SEND_BUFFER: bytes each local link asks for, 0 for the kernel's default ([Note: local send buffers]). */
  sendBufferBytes?: number;
  /** The local links' send buffer sizes, shared with the main thread (localSendBufferBytes). */
  sendBufferReport?: Int32Array;
}
