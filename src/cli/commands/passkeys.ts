import { redisKeyPrefix } from '../../config/redis-connection.ts';
import { PasskeyStore } from '../../verify/passkeys.ts';
import { cliAuditContext, cliOperator } from '../audit-context.ts';
import { policyOf } from '../cloud.ts';
import { type CliIo, UsageError, write } from '../io.ts';
import { withCliRedis } from '../redis.ts';

export const PASSKEYS_USAGE = 'cloudops passkeys reset <slack-user-id>';

/**
 * `cloudops passkeys reset <user>`: removes every passkey of a Slack user of the policy's workspace, audited. Their
 * next registration is then a first one again (docs/policy.md#verified-approvals): for someone who lost their
 * passkey, or whose Slack session registered one that was not theirs.
 */
export async function passkeysCommand(
  io: CliIo,
  args: string[],
  json: boolean,
  as?: string,
): Promise<number> {
  const [sub, user, ...extra] = args;
  if (sub !== 'reset' || user === undefined || extra.length > 0)
    throw new UsageError(`usage: ${PASSKEYS_USAGE}`);
  if (!/^[UW][A-Z0-9]{2,}$/.test(user))
    throw new UsageError(`"${user.slice(0, 32)}" is not a Slack user id (like U0123ABCD): ${PASSKEYS_USAGE}`);
  const policy = await policyOf(io);
  const operator = cliOperator(as);
  const removed = await withCliRedis(io.env, async (redis) => {
    const store = new PasskeyStore(redis, redisKeyPrefix(io.env), io.now, undefined, cliAuditContext(io));
    // Without `workspace:` the bot keeps passkeys under the team id Slack sends: every workspace where the person
    // has any is reset (Slack user ids do not repeat across workspaces).
    const found = policy.workspace ? [policy.workspace] : await store.teamsOf(user);
    // None found: still one audited reset, which finds nothing to remove.
    const teams = found.length > 0 ? found : [''];
    let count = 0;
    for (const team of teams) count += await store.reset(team, user, operator.actor, operator.requester);
    return count;
  });
  if (json) await write(io.stdout, `${JSON.stringify({ user, removed })}\n`);
  else
    await write(
      io.stdout,
      removed === 0
        ? `${user} had no passkeys; nothing removed (audited).\n`
        : `Removed ${removed} passkey${removed === 1 ? '' : 's'} of ${user} (audited). Their next registration is trusted as a first one and announced to them.\n`,
    );
  return 0;
}
