// @fsdp-ts/nn: nothing is exported yet; see the package README.
export {};
