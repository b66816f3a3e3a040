/** A V8 CPU profile of this thread between startProfile() and stop(path), through node:inspector. */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';

export interface RunningProfile {
  stop(path: string): Promise<void>;
}

export async function startProfile(): Promise<RunningProfile> {
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 500 });
  await session.post('Profiler.start');
  return {
    async stop(path) {
      const { profile } = await session.post('Profiler.stop');
      writeFileSync(path, JSON.stringify(profile));
      session.disconnect();
    },
  };
}
