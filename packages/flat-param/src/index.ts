// @fsdp-ts/flat-param: nothing is exported yet; see the package README.
export {};
