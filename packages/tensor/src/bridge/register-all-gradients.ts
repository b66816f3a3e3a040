// [Note: gradient registration]
// tfjs-core registers no gradients by itself; its `dist/register_all_gradients.js` does, as a side
// effect. That file is part of tfjs-core's per-file ESM build, written for bundlers (extensionless
// relative imports), so plain Node cannot load it. The build (tsup.config.ts) bundles it into
// `dist/register-all-gradients.{js,cjs}`, reached at run time through the package's
// `#register-all-gradients` import. The bundle carries its own copy of the core modules the
// gradient functions call; they find the one engine, kernel registry and Tensor class through
// tfjs's global namespace, so they run on the application's tfjs-core. This replaces importing the
// whole `@tensorflow/tfjs` bundle (layers, converter, data, webgl: ~240 MB installed, ~0.9 s per
// rank at start-up). Source mode (tests, `@fsdp-ts/source`) reaches the same file through
// register-all-gradients-source.ts, which bundles it on first use.
import '@tensorflow/tfjs-core/dist/register_all_gradients.js';
// Chained ops (`tensor.mul(2)`): tfjs-core's node build leaves them out too; `@tensorflow/tfjs`
// used to add them, so keep them for code written against it.
import '@tensorflow/tfjs-core/dist/public/chained_ops/register_all_chained_ops.js';
