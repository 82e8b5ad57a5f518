import { writeFile } from 'node:fs/promises';
import { redisKeyPrefix } from '../../config/redis-connection.ts';
import { sealKeysFrom } from '../../config/seal-keys.ts';
import { exportAudit } from '../../requests/audit/audit.ts';
import { readStoredChain } from '../../requests/audit/read.ts';
import { verifyChain } from '../../requests/audit/verify.ts';
import type { AuditRecord } from '../../requests/model/audit-record.ts';
import { CliError, type CliIo, UsageError, write } from '../io.ts';
import { withCliRedis } from '../redis.ts';
import { type ChainResult, reportCsv, reportHtml } from '../report/render.ts';
import { reportRows, reportSummary } from '../report/rows.ts';
import { REPORT_USAGE } from '../usage.ts';

const FORMATS = ['csv', 'html', 'json'] as const;
type Format = (typeof FORMATS)[number];
const DAY_MS = 86_400_000;

/** A YYYY-MM-DD date as its UTC midnight; a UsageError naming the flag otherwise. */
function dateOf(flag: string, value: unknown): Date {
  if (typeof value !== 'string') throw new UsageError(`report needs --${flag} YYYY-MM-DD (${REPORT_USAGE})`);
  const date = new Date(`${value}T00:00:00Z`);
  if (
    !/^\d{4}-\d{2}-\d{2}$/.test(value) ||
    Number.isNaN(date.getTime()) ||
    date.toISOString().slice(0, 10) !== value
  )
    throw new UsageError(`--${flag}: expected a date such as 2026-01-31, got "${value.slice(0, 40)}"`);
  return date;
}

/** What the chain's check says, for the report's summary. */
async function chainResult(io: CliIo, redis: Parameters<typeof readStoredChain>[0]): Promise<ChainResult> {
  const sealer = io.env.SEAL_KEY ? sealKeysFrom(io.env.SEAL_KEY, io.env.SEAL_KEY_PREVIOUS) : undefined;
  const chain = await readStoredChain(redis, redisKeyPrefix(io.env));
  const verdict = verifyChain(chain.records, {
    sealer,
    head: chain.head,
    ...(chain.anchor ? { anchor: chain.anchor } : {}),
  });
  if (!verdict.ok) return { ok: false, text: `The audit chain is broken: ${verdict.message}.` };
  const what = verdict.sealsChecked
    ? 'hashes and seals'
    : 'hashes only: SEAL_KEY was not given to check the seals';
  return {
    ok: true,
    text: `The audit chain verified when this report was made: ${verdict.checked} entries, ${what}.`,
  };
}

/**
 * `cloudops report --from --to [--project] [--format csv|html|json] [--out FILE]`: every request made in the period
 * (both days included), one row each, from the audit chain (docs/operations.md#report).
 */
export async function reportCommand(io: CliIo, values: Record<string, unknown>): Promise<number> {
  const from = dateOf('from', values.from);
  const toDay = dateOf('to', values.to);
  if (toDay < from) throw new UsageError('--to is before --from');
  const format = (values.format ?? 'csv') as Format;
  if (!FORMATS.includes(format)) throw new UsageError(`--format is one of ${FORMATS.join(', ')}`);
  const project = typeof values.project === 'string' ? values.project : undefined;
  const period = { from, to: new Date(toDay.getTime() + DAY_MS), ...(project ? { project } : {}) };
  const { rows, chain } = await withCliRedis(io.env, async (redis) => {
    const records: AuditRecord[] = [];
    for await (const entry of exportAudit(redis, redisKeyPrefix(io.env), from))
      if (entry.record) records.push(entry.record);
    return { rows: reportRows(records, period), chain: await chainResult(io, redis) };
  });
  const summary = reportSummary(rows);
  const meta = {
    from: from.toISOString().slice(0, 10),
    to: toDay.toISOString().slice(0, 10),
    ...(project ? { project } : {}),
    generatedAt: io.now().toISOString(),
    chain,
  };
  const text =
    format === 'csv'
      ? reportCsv(rows)
      : format === 'html'
        ? reportHtml(rows, summary, meta)
        : `${JSON.stringify({ ...meta, summary, rows }, null, 2)}\n`;
  if (typeof values.out === 'string') {
    await writeFile(values.out, text).catch((error: NodeJS.ErrnoException) => {
      throw new CliError(`--out: cannot write ${values.out} (${error.code ?? 'error'})`);
    });
    await write(io.stdout, `${rows.length} requests written to ${values.out}\n`);
  } else await write(io.stdout, text);
  return 0;
}
