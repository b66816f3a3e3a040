/**
 * [Note: declarations from the builds] tsup's declaration pass (most of a package's build) type-
 * checks the package together with every project package it imports. Built alone (its prepack,
 * `npm run build -w`), a package cannot count on the others being built, so their types resolve
 * to their sources through the `@fsdp-ts/source` condition of tsconfig.base.json. The root `npm
 * run build` runs turbo with `^build` (each package after the packages it imports) and sets
 * FSDP_DECLARATIONS_FROM_BUILDS=1: their types then resolve to the `.d.ts` files their own builds
 * wrote, and each pass checks only its own package. The declarations written are the same bytes
 * either way (compared for every package when this was introduced); the eleven builds took 37 s
 * wall for 67 CPU-s resolving sources and 24 s for 44 resolving builds (quiet 2-core machine).
 */
export function declarationOptions<Options extends object>(options?: Options): Options {
  const fromBuilds = process.env.FSDP_DECLARATIONS_FROM_BUILDS === '1';
  return {
    ...(options ?? ({} as Options)),
    ...(fromBuilds ? { compilerOptions: { customConditions: [] } } : {}),
  };
}
