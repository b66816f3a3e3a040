/**
 * [Note: shm control block] One Int32Array over a SharedArrayBuffer per shm group, shared by the
 * communication workers of all its ranks:
 *   slot 0                 0, or 1 + the rank that aborted the group ([Note: abort])
 *   slot 1                 completion wake word, bumped by every rank that finishes an op
 *   slots 2 .. 2+size      doorbell of rank r, bumped after posting a message to r's port
 *   slots 2+size .. 2+2size sequence number of the last op rank r finished
 * Messages themselves travel over MessagePorts (one per pair of ranks) and are read with
 * receiveMessageOnPort, so a worker blocked in Atomics.wait still gets them in order.
 */
export const ABORT_SLOT = 0;
export const COMPLETION_WAKE = 1;

export function controlLength(size: number): number {
  return 2 + 2 * size;
}

export function doorbellSlot(rank: number): number {
  return 2 + rank;
}

export function finishedSlot(rank: number, size: number): number {
  return 2 + size + rank;
}

export function createControl(size: number): Int32Array {
  return new Int32Array(new SharedArrayBuffer(controlLength(size) * 4));
}
