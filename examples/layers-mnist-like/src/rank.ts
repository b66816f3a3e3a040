/** One rank of the distributed run (started by fsdp-run). Rank 0 prints and writes the result. */
import { writeFileSync } from 'node:fs';
import { initProcessGroup } from '@fsdp-ts/collectives';
import { initBackend } from '@fsdp-ts/tensor';
import { parseExampleOptions } from './options';
import { train } from './train';

const options = parseExampleOptions(process.argv.slice(2));
// tfjs's wasm backend has no Conv2DBackpropFilter kernel: convolutions train on the cpu backend.
await initBackend(process.env.FSDP_BACKEND === undefined ? 'cpu' : undefined);
const group = await initProcessGroup();
try {
  const result = await train(options, group);
  if (group.rank === 0) {
    console.log(JSON.stringify(result));
    if (options.out !== undefined) writeFileSync(options.out, JSON.stringify(result));
  }
} finally {
  await group.destroy();
}
