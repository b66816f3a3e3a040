// @fsdp-ts/fsdp: nothing is exported yet; see the package README.
export {};
