import { formatCheck } from '../../doctor/report.ts';
import { runDoctor } from '../../doctor/run.ts';
import { type CliIo, write } from '../io.ts';

/**
 * `cloudops doctor [--json]`: one line per check (✓ ok, ! warning, ✗ failure with what to do); exit 1 on any
 * failure. `--json`: `{ ok, checks: [{ id, status, summary, fix }] }` on one line.
 */
export async function doctorCommand(io: CliIo, json: boolean): Promise<number> {
  const checks = await runDoctor(io.env);
  const failed = checks.some((check) => check.status === 'fail');
  if (json) await write(io.stdout, `${JSON.stringify({ ok: !failed, checks })}\n`);
  else await write(io.stdout, `${checks.map(formatCheck).join('\n')}\n`);
  return failed ? 1 : 0;
}
