/**
 * The whole stack in one import. Each line re-exports one package; the packages are also usable
 * alone (`@fsdp-ts/tensor`, `@fsdp-ts/collectives`, ...).
 *
 * @packageDocumentation
 * @document ../README.md
 * @module fsdp-ts
 */
export * from '@fsdp-ts/collectives';
export * from '@fsdp-ts/errors';
export * from '@fsdp-ts/flat-param';
export * from '@fsdp-ts/fsdp';
export * from '@fsdp-ts/nn';
export * from '@fsdp-ts/optim';
export * from '@fsdp-ts/tensor';
