/**
 * [Note: failure records] How a worker's crash reaches fsdp-run as one report instead of Node's
 * dump of the whole error on every rank (torchelastic's TORCHELASTIC_ERROR_FILE is the model).
 * fsdp-run gives each worker two paths in its run directory ([Note: run directory]):
 * FSDP_ERROR_FILE (the record, JSON) and FSDP_ERROR_LOG (the full text). The module below, part
 * of the preamble every worker imports (`--import`, see parent-watchdog.ts), listens for
 * 'uncaughtException', which Node also raises for an unhandled rejection. On a crash it writes,
 * synchronously (so the files exist whatever happens next), the log (util.inspect of the error:
 * stack, typed fields, causes with their stacks) and then the record (the error and its causes as
 * name, code, message without its " Fix: …", fix, rank, peer, stack, whether it is an fsdp-ts
 * error), prints nothing unless FSDP_DEBUG=1 (then the full text goes to stderr as well, as Node
 * would print it), and exits with code 1 as Node does. A script that installs its own
 * 'uncaughtException' listener keeps control: the record is still written, nothing is printed
 * and the process is not ended here. If the files cannot be written, the full text goes to
 * stderr instead. The launcher reads a record only for a worker that exited non-zero, after it
 * exited (failure-record.ts), so a record needs no atomic rename.
 */
export const FAILURE_RECORDER_MODULE = `
import { writeFileSync as writeFailureFile } from 'node:fs';
import { inspect as inspectFailure } from 'node:util';
const failureRecordPath = process.env.FSDP_ERROR_FILE;
const failureLogPath = process.env.FSDP_ERROR_LOG;
if (failureRecordPath && failureLogPath) {
  const projectMarker = Symbol.for('fsdp-ts.error');
  const describeFailure = (value, depth) => {
    if (value === null || (typeof value !== 'object' && typeof value !== 'function')) {
      return { name: 'thrown ' + typeof value, message: String(value), project: false };
    }
    let name = 'Error';
    try { name = typeof value.name === 'string' ? value.name : (value.constructor && value.constructor.name) || 'Error'; } catch {}
    const fix = typeof value.fix === 'string' ? value.fix : undefined;
    let message = typeof value.message === 'string' ? value.message : inspectFailure(value, { depth: 2 });
    const suffix = fix === undefined ? undefined : ' Fix: ' + fix;
    if (suffix !== undefined && message.endsWith(suffix)) message = message.slice(0, -suffix.length);
    const described = { name, message, project: value[projectMarker] === true };
    if (fix !== undefined) described.fix = fix;
    if (typeof value.code === 'string' || typeof value.code === 'number') described.code = String(value.code);
    if (Number.isInteger(value.rank)) described.rank = value.rank;
    if (Number.isInteger(value.peer)) described.peer = value.peer;
    if (typeof value.stack === 'string') described.stack = value.stack;
    if (depth < 8 && value.cause !== undefined) described.cause = describeFailure(value.cause, depth + 1);
    return described;
  };
  process.on('uncaughtException', (error, origin) => {
    const ownsExit = process.listenerCount('uncaughtException') === 1;
    let text = 'an uncaught value that cannot be printed';
    try { text = inspectFailure(error, { depth: 8 }); } catch {}
    let written = false;
    try {
      const header = 'rank ' + process.env.RANK + ' (pid ' + process.pid + ', ' + origin + ', ' + new Date().toISOString() + ')';
      writeFailureFile(failureLogPath, header + '\\n' + text + '\\n');
      const record = { version: 1, rank: Number(process.env.RANK), origin, log: failureLogPath, error: describeFailure(error, 0) };
      writeFailureFile(failureRecordPath, JSON.stringify(record));
      written = true;
    } catch {}
    if (!ownsExit) return;
    if (!written || process.env.FSDP_DEBUG === '1') process.stderr.write(text + '\\n');
    process.exit(1);
  });
}
`;
