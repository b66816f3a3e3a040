/** The single-process baseline: plain model.fit on the same data. */
import { writeFileSync } from 'node:fs';
import { initBackend } from '@fsdp-ts/tensor';
import { parseExampleOptions } from './options';
import { train } from './train';

const options = parseExampleOptions(process.argv.slice(2));
await initBackend(process.env.FSDP_BACKEND === undefined ? 'cpu' : undefined);
const result = await train(options, null);
console.log(JSON.stringify(result));
if (options.out !== undefined) writeFileSync(options.out, JSON.stringify(result));
