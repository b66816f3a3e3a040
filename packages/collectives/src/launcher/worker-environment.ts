import type { LaunchOptions } from './launch-options.js';
import { buildWorkerCommand } from './worker-command.js';

export interface WorkerIdentity {
  rank: number;
  localRank: number;
  attempt: number;
  secret: string;
  /** The store's actual port (the one picked when --master-port was 0). */
  port: number;
  timeoutMs: number;
}

/**
 * The environment and node arguments of one worker: the launcher's own environment plus the
 * contract of "Environment contract" in the README. FSDP_JOB_SECRET_FILE is removed (the secret
 * itself is passed), so workers never see both.
 */
export function buildWorkerEnvironment(
  options: LaunchOptions,
  parent: NodeJS.ProcessEnv,
  identity: WorkerIdentity,
): { env: NodeJS.ProcessEnv; nodeArguments: string[] } {
  const { FSDP_JOB_SECRET_FILE: _file, ...inherited } = parent;
  const env: NodeJS.ProcessEnv = {
    ...inherited,
    RANK: String(identity.rank),
    WORLD_SIZE: String(options.nnodes * options.nprocPerNode),
    LOCAL_RANK: String(identity.localRank),
    LOCAL_WORLD_SIZE: String(options.nprocPerNode),
    FSDP_NODE_RANK: String(options.nodeRank),
    FSDP_NNODES: String(options.nnodes),
    MASTER_ADDR: options.masterAddr,
    MASTER_PORT: String(identity.port),
    FSDP_JOB_SECRET: identity.secret,
    FSDP_RESTART_COUNT: String(identity.attempt),
    FSDP_STORE_PREFIX: `attempt-${identity.attempt}/`,
    FSDP_AGENT_STORE: '1',
    FSDP_LAUNCHER_PID: String(process.pid),
  };
  if (options.timeoutGiven) env.FSDP_TIMEOUT_MS = String(identity.timeoutMs);
  if (options.socketIfname !== undefined) env.FSDP_SOCKET_IFNAME = options.socketIfname;
  if (options.socketAddr !== undefined) env.FSDP_SOCKET_ADDR = options.socketAddr;
  if (options.secure) env.FSDP_SECURE = '1';
  return { env, nodeArguments: buildWorkerCommand(options.script, options.scriptArguments) };
}
