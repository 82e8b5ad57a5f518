import { readFile } from 'node:fs/promises';
import { redisKeyPrefix } from '../../config/redis-connection.ts';
import { sealKeysFrom } from '../../config/seal-keys.ts';
import { parseAuditFile, readStoredChain } from '../../requests/audit/read.ts';
import { type ChainVerdict, verifyChain } from '../../requests/audit/verify.ts';
import { CliError, type CliIo, write } from '../io.ts';
import { withCliRedis } from '../redis.ts';

/**
 * `cloudops audit verify [--file F]`: recomputes the audit chain (docs/operations.md#verifying-the-audit) in Redis,
 * or in an exported copy; exit 0 with the count checked, or 1 naming the first entry changed, removed or inserted.
 * Seals are checked when SEAL_KEY is set (always for Redis: a chain rebuilt without the key is caught only so).
 */
export async function auditVerifyCommand(io: CliIo, file: string | undefined): Promise<number> {
  const sealer = io.env.SEAL_KEY ? sealKeysFrom(io.env.SEAL_KEY, io.env.SEAL_KEY_PREVIOUS) : undefined;
  let verdict: ChainVerdict;
  let where: string;
  if (file !== undefined) {
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (error) {
      throw new CliError(`--file: cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
    }
    let records: ReturnType<typeof parseAuditFile>;
    try {
      records = parseAuditFile(text);
    } catch (error) {
      throw new CliError(`${file}: ${(error as Error).message}`);
    }
    verdict = verifyChain(records, { sealer, openStart: true });
    where = file;
  } else {
    const chain = await withCliRedis(io.env, (redis) => readStoredChain(redis, redisKeyPrefix(io.env)));
    verdict = verifyChain(chain.records, {
      sealer,
      head: chain.head,
      ...(chain.anchor ? { anchor: chain.anchor } : {}),
    });
    where = 'Redis';
  }
  if (!verdict.ok)
    throw new CliError(
      `audit chain in ${where} broken after ${verdict.checked} good entries: ${verdict.message}`,
    );
  const seals = verdict.sealsChecked ? 'hashes and seals' : 'hashes only (set SEAL_KEY to check the seals)';
  const older = verdict.unchained > 0 ? `; ${verdict.unchained} older entries written before the chain` : '';
  await write(io.stdout, `audit chain in ${where} verified: ${verdict.checked} entries, ${seals}${older}\n`);
  return 0;
}
