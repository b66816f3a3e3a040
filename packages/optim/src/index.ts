// @fsdp-ts/optim: nothing is exported yet; see the package README.
export {};
