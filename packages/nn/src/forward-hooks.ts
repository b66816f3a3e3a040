/**
 * [Note: forward hooks]
 * A module's `forward` is the subclass's own method; callers call it directly. Hooks attach to
 * one module instance and run around every call of its `forward`:
 *   pre hooks (in registration order; one may return replacement arguments)
 *   → wrappers (the first registered outermost; each gets `next` and the arguments)
 *   → the module's forward
 *   → post hooks (in registration order; one may return a replacement output).
 * Registering the first hook gives the instance a dispatching `forward` (own property, bound to
 * the original); removing the last one deletes it, so an unhooked module runs its method
 * directly. Every registration returns a handle whose `remove()` detaches it (idempotent).
 */

/** Runs before forward; returning an array replaces the arguments. */
export type ForwardPreHook = (module: object, args: unknown[]) => unknown;
/** Runs after forward; returning a value other than undefined replaces the output. */
export type ForwardHook = (module: object, args: unknown[], output: unknown) => unknown;
/** Runs instead of forward and calls `next` (possibly inside something: a customGrad, a scope). */
export type ForwardWrapper = (next: (...args: unknown[]) => unknown, args: unknown[]) => unknown;

/** Detaches one hook. */
export interface RemovableHandle {
  /** Removes the hook. */
  remove(): void;
}

interface HookLists {
  readonly original: (...args: unknown[]) => unknown;
  readonly pre: ForwardPreHook[];
  readonly wrappers: ForwardWrapper[];
  readonly post: ForwardHook[];
}

const hooksKey = Symbol('fsdp-ts.nn.forwardHooks');

type Hookable = { forward: (...args: never[]) => unknown; [hooksKey]?: HookLists };

export function addForwardHook(
  module: object,
  kind: 'pre' | 'wrappers' | 'post',
  hook: ForwardPreHook | ForwardWrapper | ForwardHook,
): RemovableHandle {
  const target = module as Hookable;
  let lists = target[hooksKey];
  if (lists === undefined) {
    const original = target.forward.bind(module) as (...args: unknown[]) => unknown;
    lists = { original, pre: [], wrappers: [], post: [] };
    const installed = lists;
    target[hooksKey] = installed;
    Object.defineProperty(module, 'forward', {
      configurable: true,
      writable: true,
      value: (...args: unknown[]) => dispatch(module, installed, args),
    });
  }
  const list = lists[kind] as unknown[];
  list.push(hook);
  let removed = false;
  return {
    remove: () => {
      if (removed) return;
      removed = true;
      list.splice(list.indexOf(hook), 1);
      const current = target[hooksKey];
      if (current !== undefined && current.pre.length + current.wrappers.length + current.post.length === 0) {
        delete (module as { forward?: unknown }).forward;
        delete target[hooksKey];
      }
    },
  };
}

function dispatch(module: object, lists: HookLists, given: unknown[]): unknown {
  let args = given;
  for (const hook of [...lists.pre]) {
    const replaced = hook(module, args);
    if (Array.isArray(replaced)) args = replaced;
  }
  const wrappers = [...lists.wrappers];
  const call = (depth: number, callArgs: unknown[]): unknown =>
    depth === wrappers.length
      ? lists.original(...callArgs)
      : wrappers[depth]!((...next: unknown[]) => call(depth + 1, next), callArgs);
  let output = call(0, args);
  for (const hook of [...lists.post]) {
    const replaced = hook(module, args, output);
    if (replaced !== undefined) output = replaced;
  }
  return output;
}
