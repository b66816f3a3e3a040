import type { OptionKeys } from '@fsdp-ts/errors';
import type { Module } from '@fsdp-ts/nn';
import { checkFsdpOptionKeys } from './internal/check-option-keys';

/** A Module subclass, as wrap policies name them. */
// biome-ignore lint/suspicious/noExplicitAny: module classes take any constructor arguments.
export type ModuleClass = abstract new (...args: any[]) => Module;

/**
 * Which submodules become their own FSDP units:
 * - an array of module classes (`[TransformerBlock]`);
 * - `{ minNumParams: n }`: a module whose parameters (its own and its descendants', not yet in a
 *   unit) number at least n elements;
 * - a predicate `(module, name) => boolean`.
 * Matching is outermost-first: a matched module's descendants are not considered (units do not
 * nest, apart from every unit sitting inside the root unit).
 */
export type AutoWrapPolicy =
  | readonly ModuleClass[]
  | { readonly minNumParams: number }
  | ((module: Module, name: string) => boolean);

/** The keys of the object form of a policy ([Note: option keys] in @fsdp-ts/errors). */
const sizePolicyKeys = { minNumParams: true } as const satisfies OptionKeys<
  Extract<AutoWrapPolicy, { readonly minNumParams: number }>
>;

/**
 * Throws FsdpError('unknown-option') when the object form of a policy has a key other than
 * minNumParams (PyTorch's policy arguments named).
 */
export function checkWrapPolicyKeys(option: string, policy: unknown): void {
  if (typeof policy !== 'object' || policy === null || Array.isArray(policy)) return;
  checkFsdpOptionKeys(`FullyShardedDataParallel ${option}`, policy, sizePolicyKeys, {
    min_num_params: "size_based_auto_wrap_policy's min_num_params is minNumParams here: { minNumParams: n }",
    transformer_layer_cls:
      "transformer_auto_wrap_policy's transformer_layer_cls is the policy itself here: an array of module classes, [TransformerBlock]",
  });
}

/** The unit roots the policy picks, as [dotted name, module] in traversal order. */
export function selectUnitModules(root: Module, policy: AutoWrapPolicy | undefined): [string, Module][] {
  if (policy === undefined) return [];
  const matches = (module: Module, name: string) => policyMatches(policy, module, name);
  const selected: [string, Module][] = [];
  const visit = (module: Module, prefix: string) => {
    for (const [childName, child] of module.namedChildren()) {
      const name = prefix === '' ? childName : `${prefix}.${childName}`;
      if (matches(child, name)) selected.push([name, child]);
      else visit(child, name);
    }
  };
  visit(root, '');
  return selected;
}

/** Whether `policy` selects `module` (named `name`), as for auto-wrapping. */
export function policyMatches(policy: AutoWrapPolicy, module: Module, name: string): boolean {
  if (typeof policy === 'function')
    return (policy as (module: Module, name: string) => boolean)(module, name);
  if (Array.isArray(policy)) return (policy as readonly ModuleClass[]).some((type) => module instanceof type);
  const minimum = (policy as { minNumParams: number }).minNumParams;
  return module.parameters().reduce((sum, parameter) => sum + parameter.numel, 0) >= minimum;
}
