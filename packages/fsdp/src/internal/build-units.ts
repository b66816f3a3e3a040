import { FlatParamHandle } from '@fsdp-ts/flat-param';
import type { Module } from '@fsdp-ts/nn';
import type { Parameter } from '@fsdp-ts/tensor';
import { FsdpError } from '../errors';
import type { ResolvedFsdpOptions } from '../options';
import { selectUnitModules } from '../wrap-policy';
import { FsdpUnit, type UnitLocation, type UnitSettings } from './fsdp-unit';

/**
 * [Note: deferred wrapping]
 * A model built inside nn's `deferredInit` reaches the wrapper without values. Each unit's
 * FlatParamHandle.create allocates the unit's shard and has every deferred Parameter write just
 * the elements the rank keeps (flat-param's flattenIntoShard, tensor's copyValuesInto), unit by
 * unit: under 'full-shard' a rank holds its shards and nothing more while wrapping, under
 * 'no-shard' (a world of one for the layout) every value. The values equal eager construction's
 * bit for bit (nn's [Note: deferred initialisation]). Ignored modules' parameters are materialised
 * whole, as they train unsharded.
 *
 * Splits the model's parameters into units: one per module the wrap policy selects (its whole
 * subtree), and the root unit with the rest. Ignored modules' parameters stay outside FSDP. Each
 * unit gets one FlatParamHandle (flattenParameters) or one per parameter.
 */
export function buildUnits(
  root: Module,
  options: ResolvedFsdpOptions,
): { units: FsdpUnit[]; locations: Map<Parameter, UnitLocation>; ignored: Set<Parameter> } {
  const ignored = new Set<Parameter>();
  for (const module of options.ignoredModules)
    for (const parameter of module.parameters()) ignored.add(parameter);
  // [Note: deferred wrapping] Ignored parameters stay whole on every rank: make their values.
  for (const parameter of ignored) parameter.materialize();
  const selected = selectUnitModules(root, options.autoWrapPolicy).filter(
    ([, module]) => !options.ignoredModules.includes(module),
  );
  const owner = new Map<Parameter, string>();
  const claim = (parameter: Parameter, unitName: string) => {
    const previous = owner.get(parameter);
    if (previous !== undefined && previous !== unitName) {
      throw new FsdpError(
        `${parameter} is shared by unit '${previous || '<root>'}' and unit '${unitName || '<root>'}'.`,
        {
          code: 'unsupported-model',
          expected: 'each Parameter used by one unit (tied parameters inside one unit)',
          actual: [previous, unitName],
          fix: 'change the wrap policy so the modules that share a Parameter fall in the same unit (e.g. leave them in the root unit).',
        },
      );
    }
    owner.set(parameter, unitName);
  };
  const unitParameters = selected.map(([name, module]) => {
    // Every registration path: a tied Parameter keeps each of its names (see [Note: tied names]).
    const named = module.namedParameterPaths(name).filter(([, parameter]) => !ignored.has(parameter));
    for (const [, parameter] of named) claim(parameter, name);
    return named;
  });
  // Claim the Parameters that modules outside every unit register, so a Parameter tied between a
  // unit and the root unit fails here (root.namedParameters() lists a tied Parameter once only).
  const outside = parametersOutsideUnits(root, new Set(selected.map(([, module]) => module)));
  for (const parameter of outside) if (!ignored.has(parameter)) claim(parameter, '');
  const rootNamed = root
    .namedParameterPaths()
    .filter(([, parameter]) => !ignored.has(parameter) && outside.has(parameter));
  const { group } = options;
  const sharded = options.sharding.shardParameters;
  const handleOptions = {
    rank: sharded ? group.rank : 0,
    worldSize: sharded ? group.size : 1,
    alignment: options.alignment,
  };
  const makeHandles = (named: [string, Parameter][]) => {
    if (named.length === 0) return [];
    if (options.flattenParameters) return [FlatParamHandle.create(named, handleOptions)];
    return byParameter(named).map((pairs) => FlatParamHandle.create(pairs, handleOptions));
  };
  const settings: UnitSettings = {
    group,
    sharding: options.sharding,
    gatherDtype: options.mixedPrecision?.paramDtype ?? 'float32',
    reduceDtype: options.mixedPrecision?.reduceDtype ?? 'float32',
  };
  const units = [
    new FsdpUnit('', root, true, makeHandles(rootNamed), settings),
    ...selected.map(
      ([name, module], index) =>
        new FsdpUnit(name, module, false, makeHandles(unitParameters[index]!), settings),
    ),
  ];
  const locations = new Map<Parameter, UnitLocation>();
  for (const unit of units) {
    for (const handle of unit.handles) {
      handle.parameters.forEach((parameter, index) => {
        locations.set(parameter, { unit, handle, index });
      });
    }
  }
  return { units, locations, ignored };
}

/**
 * [Note: tied names]
 * A unit's handles are built from every registration path, so a tied Parameter's layout entry
 * lists each of its names (first the one namedParameters() uses). State dicts, checkpoints and
 * safetensors then accept any of the names on load, and exportSafetensors writes each, as
 * PyTorch's state_dict() lists each.
 * One group of pairs per distinct Parameter (a tied one with each of its names), in order.
 */
function byParameter(named: [string, Parameter][]): [string, Parameter][][] {
  const groups = new Map<Parameter, [string, Parameter][]>();
  for (const pair of named) {
    const group = groups.get(pair[1]) ?? [];
    group.push(pair);
    groups.set(pair[1], group);
  }
  return [...groups.values()];
}

/** Parameters registered by the modules reached from `root` without entering a unit's module. */
function parametersOutsideUnits(root: Module, unitModules: ReadonlySet<Module>): Set<Parameter> {
  const found = new Set<Parameter>();
  const visited = new Set<Module>();
  const visit = (module: Module) => {
    if (visited.has(module) || unitModules.has(module)) return;
    visited.add(module);
    // A module's own parameters are the undotted names of its namedParameters().
    for (const [name, parameter] of module.namedParameters()) if (!name.includes('.')) found.add(parameter);
    for (const child of module.children()) visit(child);
  };
  visit(root);
  return found;
}
