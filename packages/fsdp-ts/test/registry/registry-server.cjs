// The local npm registry of installed-app.int.test.ts: Verdaccio (installed by local-registry.ts
// into node_modules/.cache) on 127.0.0.1 at a port the system picks, which it prints as
// `fsdp-ts-registry listening PORT`. Usage: node registry-server.cjs VERDACCIO_DIRECTORY CONFIG.
// It exits when its parent closes its stdin, so a test that dies leaves no registry behind.
const { createRequire } = require('node:module');
const { join } = require('node:path');

const [verdaccioDirectory, config] = process.argv.slice(2);
const { runServer } = createRequire(join(verdaccioDirectory, 'package.json'))('verdaccio');

process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
process.on('SIGTERM', () => process.exit(0));

runServer(config).then(
  (server) => {
    server.listen(0, '127.0.0.1', () => {
      process.stdout.write(`fsdp-ts-registry listening ${server.address().port}\n`);
    });
  },
  (error) => {
    process.stderr.write(`fsdp-ts-registry: ${error.stack ?? error}\n`);
    process.exit(1);
  },
);
