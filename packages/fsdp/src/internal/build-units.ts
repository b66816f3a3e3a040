import { FlatParamHandle } from '@fsdp-ts/flat-param';
import type { Module } from '@fsdp-ts/nn';
import type { Parameter } from '@fsdp-ts/tensor';
import { FsdpError } from '../errors';
import type { ResolvedFsdpOptions } from '../options';
import { selectUnitModules } from '../wrap-policy';
import { FsdpUnit, type ParameterLocation } from './fsdp-unit';

/**
 * Splits the model's parameters into units: one per module the wrap policy selects (its whole
 * subtree), and the root unit with the rest. Ignored modules' parameters stay outside FSDP. Each
 * unit gets one FlatParamHandle (flattenParameters) or one per parameter.
 */
export function buildUnits(
  root: Module,
  options: ResolvedFsdpOptions,
): { units: FsdpUnit[]; locations: Map<Parameter, ParameterLocation>; ignored: Set<Parameter> } {
  const ignored = new Set<Parameter>();
  for (const module of options.ignoredModules)
    for (const parameter of module.parameters()) ignored.add(parameter);
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
    const named = module.namedParameters(name).filter(([, parameter]) => !ignored.has(parameter));
    for (const [, parameter] of named) claim(parameter, name);
    return named;
  });
  const rootNamed = root
    .namedParameters()
    .filter(([, parameter]) => !ignored.has(parameter) && (owner.get(parameter) ?? '') === '');
  // A parameter tied between a unit and the root appears in both traversals: claim catches it.
  for (const [, parameter] of rootNamed) claim(parameter, '');
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
    return distinct(named).map((pair) => FlatParamHandle.create([pair], handleOptions));
  };
  const units = [
    new FsdpUnit('', root, true, makeHandles(rootNamed), options.sharding),
    ...selected.map(
      ([name, module], index) =>
        new FsdpUnit(name, module, false, makeHandles(unitParameters[index]!), options.sharding),
    ),
  ];
  const locations = new Map<Parameter, ParameterLocation>();
  for (const unit of units) {
    for (const handle of unit.handles) {
      handle.parameters.forEach((parameter, index) => {
        locations.set(parameter, { unit, handle, index });
      });
    }
  }
  return { units, locations, ignored };
}

/** One pair per distinct Parameter (a tied one under its first name). */
function distinct(named: [string, Parameter][]): [string, Parameter][] {
  const seen = new Set<Parameter>();
  return named.filter(([, parameter]) => {
    if (seen.has(parameter)) return false;
    seen.add(parameter);
    return true;
  });
}
