/**
 * [Note: kernel blocks]
 * WebAssembly addresses only memory it was given as a WebAssembly.Memory, so a kernel stepping
 * arrays that live in ordinary ArrayBuffers copies them through its own memory, chunk by chunk
 * (optim's AdamW spent two thirds of its time in those copies). A kernel block is one
 * WebAssembly.Memory of its own (not shared, never grown) that holds a float32 array and room
 * beside it for the arrays that are stepped with it: a Parameter's values at byte 0, then one
 * slot each for its gradient and optimizer state, then a small scratch region for kernels. A
 * kernel module instantiated over the block's memory updates all of them where they are.
 *
 * Lifetime: a block's buffer lives as long as anything views it (a typed array keeps its buffer
 * alive, as for any ArrayBuffer), and nothing in it is ever freed or handed out twice: `take`
 * gives each slot once, so memory is never reused under a view someone still holds. A caller
 * whose slot is taken allocates ordinary memory, and the kernels copy that one array.
 * Untouched pages of a block are never backed (the OS zero-fills on first write), so a slot
 * nobody takes costs address space, not memory. Each memory reserves address space (V8 gives
 * up after about 13,000 live memories here), so blocks are made only for arrays of at least
 * KERNEL_BLOCK_MINIMUM_ELEMENTS and at most KERNEL_BLOCK_LIVE_LIMIT live at once; past either,
 * or where WebAssembly is unavailable, `kernelBlock` answers null and the caller uses an
 * ordinary buffer (same results, the copying path).
 *
 * Slots start at different offsets within a 4 KiB page (640 bytes apart): a
 * kernel storing one array and loading the next at the same page offset stalls on 4 KiB
 * aliasing ([Note: scratch off the arrays' page offsets] in @fsdp-ts/optim).
 */
import { webAssembly } from '../wasm/wasm-encoding';

/** The arrays a block has room for beside its own, in address order. */
export const KERNEL_BLOCK_SLOTS = ['grad', 'expAvg', 'expAvgSq', 'maxExpAvgSq'] as const;
export type KernelBlockSlot = (typeof KERNEL_BLOCK_SLOTS)[number];
/** Arrays smaller than this get no block (their copies cost little; a memory each costs address space). */
export const KERNEL_BLOCK_MINIMUM_ELEMENTS = 16_384;
/** At most this many blocks are alive at once (see the note). */
export const KERNEL_BLOCK_LIVE_LIMIT = 2048;
/** Float32 elements of the scratch region after the slots. */
export const KERNEL_BLOCK_SCRATCH_ELEMENTS = 4096 + 64;
const SLOT_STAGGER = 640; // bytes between consecutive regions' page offsets (5 regions after byte 0)
const PAGE = 65_536;
const LARGEST_BYTES = 2 ** 31; // keep addresses in positive i32 range

/** One kernel block: a float32 array and, beside it in the same memory, its slots and scratch. */
export class KernelBlock {
  /** The block's memory: instantiate kernel modules over it (`{ env: { memory } }`). */
  readonly memory: object;
  readonly buffer: ArrayBuffer;
  /** Elements of the block's own array and of each slot. */
  readonly numel: number;
  /** The block's own array, at byte 0. */
  readonly array: Float32Array;
  /** Kernel-private scratch (KERNEL_BLOCK_SCRATCH_ELEMENTS floats): never handed to callers. */
  readonly scratch: Float32Array;
  readonly #slotOffsets: ReadonlyMap<KernelBlockSlot, number>;
  readonly #taken = new Set<KernelBlockSlot>();

  constructor(memory: object, buffer: ArrayBuffer, numel: number, offsets: Layout) {
    this.memory = memory;
    this.buffer = buffer;
    this.numel = numel;
    this.array = new Float32Array(buffer, 0, numel);
    this.scratch = new Float32Array(buffer, offsets.scratch, KERNEL_BLOCK_SCRATCH_ELEMENTS);
    this.#slotOffsets = offsets.slots;
  }

  /** The slot's zero-filled array of `numel` floats, the first time it is asked for; null after. */
  take(slot: KernelBlockSlot): Float32Array | null {
    if (this.#taken.has(slot)) return null;
    this.#taken.add(slot);
    return new Float32Array(this.buffer, this.#slotOffsets.get(slot)!, this.numel);
  }

  /** Whether `array` lies inside this block's memory (its byteOffset is then its address). */
  holds(array: ArrayBufferView): boolean {
    return array.buffer === this.buffer;
  }
}

interface Layout {
  slots: ReadonlyMap<KernelBlockSlot, number>;
  scratch: number;
  bytes: number;
}

/** Byte offsets of the regions: each after the previous, 64-byte aligned, staggered within a page. */
function layout(numel: number): Layout {
  let end = numel * 4;
  let region = 0;
  const place = (bytes: number): number => {
    region += 1;
    const stagger = (region * SLOT_STAGGER) % 4096;
    let offset = Math.ceil(end / 64) * 64;
    offset += (stagger - (offset % 4096) + 4096) % 4096;
    end = offset + bytes;
    return offset;
  };
  const slots = new Map<KernelBlockSlot, number>();
  for (const slot of KERNEL_BLOCK_SLOTS) slots.set(slot, place(numel * 4));
  const scratch = place(KERNEL_BLOCK_SCRATCH_ELEMENTS * 4);
  return { slots, scratch, bytes: end };
}

const blocks = new WeakMap<ArrayBufferLike, KernelBlock>();
let liveBlocks = 0;
const released = new FinalizationRegistry<null>(() => {
  liveBlocks -= 1;
});

interface MemoryConstructor {
  Memory: new (descriptor: { initial: number; maximum: number }) => { buffer: ArrayBuffer };
}

/**
 * A new block for a float32 array of `numel` elements (zero-filled), or null: too small, too
 * large for a 32-bit memory, too many blocks alive, or no WebAssembly memory here.
 */
export function kernelBlock(numel: number): KernelBlock | null {
  if (numel < KERNEL_BLOCK_MINIMUM_ELEMENTS || liveBlocks >= KERNEL_BLOCK_LIVE_LIMIT) return null;
  const api = webAssembly() as unknown as MemoryConstructor | undefined;
  if (api === undefined) return null;
  const regions = layout(numel);
  if (regions.bytes > LARGEST_BYTES) return null;
  const pages = Math.ceil(regions.bytes / PAGE);
  let memory: { buffer: ArrayBuffer };
  try {
    memory = new api.Memory({ initial: pages, maximum: pages });
  } catch {
    return null; // out of address space for memories: the caller uses an ordinary buffer
  }
  const block = new KernelBlock(memory, memory.buffer, numel, regions);
  blocks.set(memory.buffer, block);
  liveBlocks += 1;
  released.register(memory.buffer, null);
  return block;
}

/** The block whose memory `array` lies in, or null. */
export function kernelBlockOf(array: ArrayBufferView): KernelBlock | null {
  return blocks.get(array.buffer) ?? null;
}
