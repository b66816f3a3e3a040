/**
 * [Note: shm control block] One Int32Array over a SharedArrayBuffer per shm group, shared by the
 * communication workers of all its ranks:
 *   slot 0                    0, or 1 + the rank that aborted the group ([Note: abort])
 *   slot 1                    completion wake word, bumped by every rank that finishes an op
 *   slots 2 .. 2+size         doorbell of rank r, bumped after posting anything for r to read
 *   slots 2+size .. 2+2size   sequence number of the last op rank r finished
 *   slots 2+2size .. 2+3size  sequence number of the last collective rank r posted in its mailbox
 *   then 2 mailboxes per rank ([Note: shm mailbox]), MAILBOX_WORDS each, rank-major
 * Buffers of large ops, and send/recv, travel over MessagePorts (one per pair of ranks) and are
 * read with receiveMessageOnPort, so a worker blocked in Atomics.wait still gets them in order.
 *
 * [Note: shm mailbox] Every collective's header goes into the posting rank's mailbox of the op's
 * parity (seq & 1): MAILBOX_HEADER_WORDS words (seq, kind, dtype, reduce op, root, peer, count),
 * then, for an op whose contribution fits INLINE_BYTES, the contribution itself. Two mailboxes
 * per rank are enough: a rank posts op seq+2 only after every peer posted op seq+1, which a peer
 * does only after it finished reading op seq.
 */
export const ABORT_SLOT = 0;
export const COMPLETION_WAKE = 1;
export const MAILBOX_HEADER_WORDS = 8;
/** The largest contribution (bytes per rank) an op carries in the mailbox instead of a port. */
export const INLINE_BYTES = 4096;
export const MAILBOX_WORDS = MAILBOX_HEADER_WORDS + INLINE_BYTES / 4;

export function controlLength(size: number): number {
  return 2 + 3 * size + 2 * size * MAILBOX_WORDS;
}

export function doorbellSlot(rank: number): number {
  return 2 + rank;
}

export function finishedSlot(rank: number, size: number): number {
  return 2 + size + rank;
}

export function postedSlot(rank: number, size: number): number {
  return 2 + 2 * size + rank;
}

/** The first word of `rank`'s mailbox for the op numbered `seq`. */
export function mailboxSlot(rank: number, size: number, seq: number): number {
  return 2 + 3 * size + (2 * rank + (seq & 1)) * MAILBOX_WORDS;
}

export function createControl(size: number): Int32Array {
  return new Int32Array(new SharedArrayBuffer(controlLength(size) * 4));
}
