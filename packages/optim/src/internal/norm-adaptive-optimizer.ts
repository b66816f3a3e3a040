import { OptimError } from '../errors';
import type { NormReductionGroup } from '../norm-reduction-group';
import { Optimizer, type PreparedParameter } from '../optimizer';
import type { BaseOptions, ParamGroup, ParamsInput } from '../param-group';

/**
 * The base of LAMB and LARS: optimizers whose update of a parameter is scaled by a ratio of two
 * norms of the WHOLE parameter (its weight, and its gradient or update).
 *
 * [Note: sharded norms]
 * Under FSDP `param.data` is only this rank's part of the parameter, so a norm computed locally is
 * the norm of a fragment. A step therefore runs in two phases:
 *   1. for every parameter (by position across all groups), `accumulate` writes this rank's partial
 *      squared norms into slots 2·position and 2·position + 1 of one Float32Array (zeros for a
 *      parameter skipped here or with no elements here);
 *   2. ONE all-reduce (sum) of that array across the group, the only communication of the step;
 *   3. `apply` updates each parameter using √(summed squares): the norms of the whole parameter.
 * Every rank must call step() with the same parameters in the same order (they do under FSDP: the
 * Parameter objects exist on every rank, only their data views differ). Without a group (or with
 * a group of size 1) step 2 is skipped and the norms are those of `param.data`, which is the whole
 * parameter when it is not sharded. The partial sums are rounded to float32 in both cases, so the
 * sharded and unsharded paths differ only in summation order.
 */
export abstract class NormAdaptiveOptimizer<Options extends BaseOptions> extends Optimizer<Options> {
  /** The ranks to sum partial norms over; null when the parameters are not sharded. */
  readonly group: NormReductionGroup | null;
  private norms: Float32Array = new Float32Array(0);

  constructor(params: ParamsInput<Options>, defaults: Options, group: NormReductionGroup | null) {
    super(params, defaults);
    if (
      group !== null &&
      (typeof group !== 'object' || typeof group.allReduce !== 'function' || !Number.isInteger(group.size))
    ) {
      throw new OptimError(`${this.constructor.name}: option 'group' is not a process group.`, {
        code: 'invalid-hyperparameter',
        expected: '{ size: number, allReduce(buffer, { op: "sum" }): { wait() } }, e.g. a ProcessGroup',
        actual: typeof group,
        fix: 'pass the ProcessGroup the parameters are sharded over, or omit it when they are not sharded.',
      });
    }
    this.group = group;
  }

  /** Phase 1: write the partial squared norms of one parameter to norms[slot], norms[slot + 1]. */
  protected abstract accumulate(
    group: ParamGroup<Options>,
    prepared: PreparedParameter,
    norms: Float32Array,
    slot: number,
  ): void;

  /** Phase 3: update one parameter given the norms of the whole parameter. */
  protected abstract apply(
    group: ParamGroup<Options>,
    prepared: PreparedParameter,
    weightNorm: number,
    otherNorm: number,
  ): void;

  step(): void {
    const count = this.paramGroups.reduce((total, group) => total + group.params.length, 0);
    if (this.norms.length !== 2 * count) this.norms = sharedFloat32Array(2 * count);
    const norms = this.norms;
    norms.fill(0);
    this.runStep(() => {
      // Two passes over the state: with offloaded state (see [Note: offloaded optimizer state])
      // each walks the chunks; the first writes the moments, the second reads them back.
      this.forEachPrepared(true, (group, prepared, position) =>
        this.accumulate(group, prepared, norms, 2 * position),
      );
      if (this.group !== null && this.group.size > 1) this.group.allReduce(norms, { op: 'sum' }).wait();
      this.forEachPrepared(false, (group, prepared, position) => {
        const weightNorm = Math.sqrt(norms[2 * position]!);
        const otherNorm = Math.sqrt(norms[2 * position + 1]!);
        this.apply(group, prepared, weightNorm, otherNorm);
      });
    });
  }
}

/** On a SharedArrayBuffer where available, so a collectives backend need not copy it. */
function sharedFloat32Array(length: number): Float32Array {
  return typeof SharedArrayBuffer === 'undefined'
    ? new Float32Array(length)
    : new Float32Array(new SharedArrayBuffer(length * Float32Array.BYTES_PER_ELEMENT));
}
