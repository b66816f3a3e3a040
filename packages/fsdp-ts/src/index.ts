// fsdp-ts: nothing is exported yet; see the package README.
export {};
