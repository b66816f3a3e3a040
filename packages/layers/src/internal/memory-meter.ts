/**
 * Bytes a trainer's buckets hold now, and the most they held at once since the last `resetPeak`
 * (allocations and frees are reported by the buckets as they happen).
 */
export class MemoryMeter {
  private currentBytes = 0;
  private peakBytes = 0;

  allocate(bytes: number): void {
    this.currentBytes += bytes;
    this.peakBytes = Math.max(this.peakBytes, this.currentBytes);
  }

  free(bytes: number): void {
    this.currentBytes -= bytes;
  }

  get current(): number {
    return this.currentBytes;
  }

  get peak(): number {
    return this.peakBytes;
  }

  resetPeak(): void {
    this.peakBytes = this.currentBytes;
  }
}
