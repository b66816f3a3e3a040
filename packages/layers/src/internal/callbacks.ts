import {
  CallbackList,
  CustomCallback,
  type CustomCallbackArgs,
  History,
  type ModelFitArgs,
} from '@tensorflow/tfjs-layers';

type AnyCallback = ConstructorParameters<typeof CallbackList>[0] extends (infer C)[] | undefined ? C : never;

function isCallbackObject(value: unknown): value is AnyCallback {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { setModel?: unknown }).setModel === 'function'
  );
}

/**
 * model.fit's callback list: the user's callbacks (objects like tf.callbacks.earlyStopping(), or
 * `{ onEpochEnd, ... }` literals) followed by a History, which fit returns.
 */
export function createCallbackList(callbacks: ModelFitArgs['callbacks']): {
  list: CallbackList;
  history: History;
} {
  const given: unknown[] = callbacks == null ? [] : Array.isArray(callbacks) ? callbacks : [callbacks];
  const standardized = given.map((callback) =>
    isCallbackObject(callback) ? callback : new CustomCallback(callback as CustomCallbackArgs),
  );
  const history = new History();
  return { list: new CallbackList([...standardized, history]), history };
}
