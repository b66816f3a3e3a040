/** What a rank of the multi-host test (multi-host-rank.ts) reports, and the run's fixed sizes. */
import type { TrainingResult } from './fixtures/training-run';

/** Samples per rank per step and sequence length of the multi-host training run. */
export const BATCH_PER_RANK = 2;
export const SEQ_LEN = 8;

export interface CaseOutcome {
  name: string;
  /** undefined when the result matched the independently computed one. */
  failure?: string;
}

export interface SocketEntry {
  state: 'listen' | 'established' | 'other';
  /** `address:port` */
  local: string;
  remote: string;
}

export interface MultiHostReport {
  rank: number;
  /** mpi-parity: the backend initProcessGroup() picked, and the host's hostname. */
  backend?: string;
  hostname?: string;
  /** Every TCP socket of this rank's namespace right after initProcessGroup (from /proc/self/net). */
  sockets: SocketEntry[];
  collectives: CaseOutcome[];
  /** By sharding strategy ('full-shard', 'hybrid-shard'). */
  training: Record<string, Pick<TrainingResult, 'losses' | 'pieces'>>;
}
