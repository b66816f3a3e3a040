import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

// [Note: the test registry]
// installed-app.int.test.ts publishes the packages to a real npm registry: Verdaccio, on
// 127.0.0.1, at a port the system picks. It keeps our names (`@fsdp-ts/*`, `fsdp-ts`) to what the
// test publishes and proxies every other name to the registry npm itself is configured with (the
// only network CI has). Verdaccio is not a dependency of the monorepo: its 327 packages would
// slow every `npm ci`. The test installs it on first use with `npm ci` from the manifest and
// lockfile committed beside this file (verdaccio 6.8.0; `overrides` pins node-fetch to 2.7.0,
// where verdaccio-audit asks for the `cjs` dist-tag), into node_modules/.cache, once per
// `npm ci` of the repository. The registry process exits when the test stops it or when the test
// process goes away (it watches its stdin), so no registry outlives a run.

const execute = promisify(execFile);
const root = join(import.meta.dirname, '..', '..', '..', '..');
const manifestDirectory = join(import.meta.dirname, 'verdaccio');
const verdaccioDirectory = join(root, 'node_modules', '.cache', 'fsdp-ts', 'verdaccio');
const serverScript = join(import.meta.dirname, 'registry-server.cjs');

/** The environment of npm commands run by the test: without the `npm_*` variables of an enclosing `npm test`. */
export function npmEnvironment(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const environment = Object.fromEntries(
    Object.entries(process.env).filter(([key]) => !key.toLowerCase().startsWith('npm_')),
  );
  return { ...environment, ...extra };
}

/** Verdaccio's directory, installed from the committed lockfile unless that install is already there. */
export async function installVerdaccio(): Promise<string> {
  const lockfile = readFileSync(join(manifestDirectory, 'package-lock.json'), 'utf8');
  const installedLockfile = join(verdaccioDirectory, 'package-lock.json');
  if (
    existsSync(join(verdaccioDirectory, 'node_modules', 'verdaccio', 'package.json')) &&
    existsSync(installedLockfile) &&
    readFileSync(installedLockfile, 'utf8') === lockfile
  ) {
    return verdaccioDirectory;
  }
  rmSync(verdaccioDirectory, { recursive: true, force: true });
  mkdirSync(verdaccioDirectory, { recursive: true });
  for (const file of ['package.json', 'package-lock.json']) {
    copyFileSync(join(manifestDirectory, file), join(verdaccioDirectory, file));
  }
  await execute('npm', ['ci', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error'], {
    cwd: verdaccioDirectory,
    env: npmEnvironment(),
    timeout: 5 * 60_000,
  });
  return verdaccioDirectory;
}

export interface LocalRegistry {
  /** `http://127.0.0.1:PORT/` */
  url: string;
  /** An npmrc with the registry and the token of the user the test registered. */
  npmrc: string;
  /** The environment for npm commands that use this registry (and only it). */
  environment: NodeJS.ProcessEnv;
  /** What the registry printed so far. */
  output(): string;
  /** Stops the registry and waits for its process to end. */
  stop(): Promise<void>;
}

/** Starts Verdaccio with its storage under `directory`, proxying other names to `uplink`. */
export async function startLocalRegistry(directory: string, uplink: string): Promise<LocalRegistry> {
  const verdaccio = await installVerdaccio();
  mkdirSync(directory, { recursive: true });
  const own = { access: '$all', publish: '$authenticated' };
  const config = {
    storage: join(directory, 'storage'),
    auth: { htpasswd: { file: join(directory, 'htpasswd'), max_users: 1 } },
    uplinks: { npmjs: { url: uplink, timeout: '60s', max_fails: 5 } },
    packages: {
      '@fsdp-ts/*': own,
      'fsdp-ts': own,
      '**': { ...own, proxy: 'npmjs' },
    },
    max_body_size: '100mb',
    web: { enable: false },
    log: { type: 'stdout', format: 'pretty', level: 'error' },
  };
  // JSON is YAML: Verdaccio reads it as its config.yaml.
  const configPath = join(directory, 'config.yaml');
  writeFileSync(configPath, JSON.stringify(config, null, 2));

  const child = spawn(process.execPath, [serverScript, verdaccio, configPath], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const stop = () => stopRegistry(child);
  try {
    const port = await listeningPort(child, () => output);
    const url = `http://127.0.0.1:${port}/`;
    const token = await registerUser(url);
    const npmrc = join(directory, 'npmrc');
    writeFileSync(npmrc, `registry=${url}\n//127.0.0.1:${port}/:_authToken=${token}\n`);
    const environment = npmEnvironment({
      npm_config_userconfig: npmrc,
      npm_config_registry: url,
      npm_config_audit: 'false',
      npm_config_fund: 'false',
      npm_config_update_notifier: 'false',
    });
    return { url, npmrc, environment, output: () => output, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

function listeningPort(child: ChildProcess, output: () => string): Promise<number> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(new Error(`the registry did not start within 60 s; it printed:\n${output()}`));
    }, 60_000);
    const check = () => {
      const match = /fsdp-ts-registry listening (\d+)/.exec(output());
      if (match === null) return;
      clearTimeout(timer);
      child.stdout?.off('data', check);
      resolve(Number(match[1]));
    };
    child.stdout?.on('data', check);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the registry exited with code ${code} before listening; it printed:\n${output()}`));
    });
  });
}

/** `npm adduser` as the registry sees it: creates the user and returns its token. */
async function registerUser(url: string): Promise<string> {
  const name = 'fsdp-ts-test';
  const response = await fetch(new URL(`-/user/org.couchdb.user:${name}`, url), {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name, password: 'fsdp-ts-test-password', type: 'user', roles: [] }),
  });
  const body = (await response.json()) as { token?: string };
  if (!response.ok || typeof body.token !== 'string') {
    throw new Error(`registering a user at ${url} failed: ${response.status} ${JSON.stringify(body)}`);
  }
  return body.token;
}

async function stopRegistry(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.stdin?.end();
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}
