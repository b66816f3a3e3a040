import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { CheckpointError } from '../errors';

/** Element types this package reads; it writes F32. */
export type SafetensorsDType = 'F32' | 'F16' | 'BF16';
export const safetensorsItemSize: Record<SafetensorsDType, number> = { F32: 4, F16: 2, BF16: 2 };

export interface SafetensorsTensor {
  dtype: SafetensorsDType;
  shape: number[];
  /** [begin, end) bytes from the start of the data section. */
  data_offsets: [number, number];
}

export interface SafetensorsHeader {
  tensors: Map<string, SafetensorsTensor>;
  metadata: Record<string, string>;
  /** Bytes before the data section: 8 + header length. */
  dataStart: number;
  fileBytes: number;
}

/**
 * [Note: safetensors format]
 * bytes 0..8: N, the header length, unsigned 64-bit little-endian; bytes 8..8+N: a UTF-8 JSON
 * object mapping each tensor name to { dtype, shape, data_offsets: [begin, end] } (offsets relative
 * to the data section, which starts at 8 + N), plus an optional "__metadata__" string map; N is
 * padded with spaces to a multiple of 8; then the tensors' raw little-endian bytes, row-major.
 */
export function encodeHeader(
  tensors: readonly { name: string; shape: readonly number[] }[],
  metadata: Record<string, string>,
): { bytes: Buffer; dataBytes: number } {
  const header: Record<string, unknown> = { __metadata__: metadata };
  let offset = 0;
  for (const tensor of tensors) {
    const bytes = tensor.shape.reduce((product, size) => product * size, 1) * 4;
    header[tensor.name] = { dtype: 'F32', shape: [...tensor.shape], data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  let json = JSON.stringify(header);
  const length = Buffer.byteLength(json);
  json += ' '.repeat((8 - (length % 8)) % 8);
  const bytes = Buffer.alloc(8 + Buffer.byteLength(json));
  bytes.writeBigUInt64LE(BigInt(Buffer.byteLength(json)), 0);
  bytes.write(json, 8, 'utf8');
  return { bytes, dataBytes: offset };
}

/** Reads and checks the header of a safetensors file. */
export function readHeader(path: string): SafetensorsHeader {
  let descriptor: number;
  try {
    descriptor = openSync(path, 'r');
  } catch (error) {
    throw invalid(path, 'cannot be opened', error, 'missing');
  }
  try {
    const fileBytes = fstatSync(descriptor).size;
    const prefix = Buffer.alloc(8);
    if (fileBytes < 8 || readSync(descriptor, prefix, 0, 8, 0) !== 8)
      throw invalid(path, 'is shorter than 8 bytes');
    const length = Number(prefix.readBigUInt64LE(0));
    if (length > fileBytes - 8 || length > 100 << 20)
      throw invalid(path, `announces a header of ${length} bytes`);
    const json = Buffer.alloc(length);
    readSync(descriptor, json, 0, length, 8);
    let parsed: Record<string, unknown>;
    try {
      parsed = JSON.parse(json.toString('utf8')) as Record<string, unknown>;
    } catch (error) {
      throw invalid(path, 'has a header that is not JSON', error);
    }
    const tensors = new Map<string, SafetensorsTensor>();
    const dataBytes = fileBytes - 8 - length;
    for (const [name, value] of Object.entries(parsed)) {
      if (name === '__metadata__') continue;
      const tensor = value as SafetensorsTensor;
      const itemSize = safetensorsItemSize[tensor?.dtype];
      const numel = Array.isArray(tensor?.shape)
        ? tensor.shape.reduce((product, size) => product * size, 1)
        : Number.NaN;
      const [begin, end] = Array.isArray(tensor?.data_offsets)
        ? tensor.data_offsets
        : [Number.NaN, Number.NaN];
      if (itemSize === undefined || !(end - begin === numel * itemSize) || begin < 0 || end > dataBytes) {
        throw invalid(path, `has an invalid or unsupported entry for ${name}: ${JSON.stringify(value)}`);
      }
      tensors.set(name, tensor);
    }
    const metadata = (parsed.__metadata__ ?? {}) as Record<string, string>;
    return { tensors, metadata, dataStart: 8 + length, fileBytes };
  } finally {
    closeSync(descriptor);
  }
}

function invalid(path: string, what: string, cause?: unknown, reason: 'missing' | 'corrupt' = 'corrupt') {
  return new CheckpointError(`${path} ${what}; expected a safetensors file with F32, F16 or BF16 tensors.`, {
    reason,
    file: path,
    ...(cause === undefined ? {} : { cause }),
    fix: 'pass a file written by exportSafetensors or by Python safetensors.',
  });
}
