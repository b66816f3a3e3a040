// @fsdp-ts/collectives: nothing is exported yet; see the package README.
export {};
