/**
 * The optimizer state of one parameter on this rank.
 *
 * [Note: state follows data]
 * Every buffer has exactly `numel` float32 elements, where `numel` is `param.data.numel` when the
 * state was created: the full parameter before wrapping, this rank's 1-D part of it while sharded
 * (possibly 0). The optimizer checks `numel` against `param.data.numel` on every step and refuses to
 * step when they differ (the parameter was re-sharded), because element i of a buffer would then
 * belong to another element of the parameter. Re-loading a state dict saved for the new layout is
 * the way out.
 */
export class ParameterState {
  /** Number of steps taken on this parameter (PyTorch keeps one per parameter too). */
  step = 0;
  readonly numel: number; // elements of param.data when the state was created
  readonly buffers = new Map<string, Float32Array>();

  constructor(numel: number) {
    this.numel = numel;
  }

  /** The named buffer, created zero-filled on first use. */
  buffer(name: string): Float32Array {
    let buffer = this.buffers.get(name);
    if (buffer === undefined) {
      buffer = new Float32Array(this.numel);
      this.buffers.set(name, buffer);
    }
    return buffer;
  }
}
