import { type Parameter, shapesEqual, type TensorView } from '@fsdp-ts/tensor';
import { FlatParamError } from '../errors';
import type { FlatParamLayout, ShardIntersection } from '../layout';
import type { ViewSet } from './view-set';

/**
 * Copies this rank's part of every parameter's current values into the sharded flat parameter,
 * and of every trainable parameter's current gradient (when it has one) into the sharded
 * gradient. Returns which parameters brought a gradient. Reads only the elements this rank keeps,
 * and of a deferred Parameter makes only those.
 */
export function flattenIntoShard(
  layout: FlatParamLayout,
  parameters: readonly Parameter[],
  intersections: readonly ShardIntersection[],
  views: ViewSet,
): boolean[] {
  return parameters.map((parameter, index) => {
    const piece = intersections[index]!;
    // A deferred Parameter makes only this piece (tensor's [Note: deferred parameters]).
    if (piece.length > 0) parameter.copyValuesInto(views.shardedData[index]!, piece.offsetInParam);
    const grad = parameter.grad;
    const target = views.shardedGrad[index];
    if (grad === null || target === null || target === undefined) return false;
    if (!shapesEqual(grad.shape, parameter.shape)) {
      throw new FlatParamError(
        `Parameter ${layout.parameters[index]!.names.join(' / ')} has a partial gradient of shape [${grad.shape.join(', ')}]: only full-shape gradients can be flattened.`,
        {
          code: 'not-full-shape',
          expected: parameter.shape,
          actual: grad.shape,
          parameters: layout.parameters[index]!.names,
          fix: 'set parameter.grad = null (or to a full-shape gradient) before flattening.',
        },
      );
    }
    copyPiece(grad, piece, target);
    return true;
  });
}

function copyPiece(source: TensorView, piece: ShardIntersection, target: TensorView): void {
  if (piece.length === 0) return;
  const flat = source.contiguous().flatten();
  target.copyFrom(flat.narrow(0, piece.offsetInParam, piece.length));
}
