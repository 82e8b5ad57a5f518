import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SlackStandIn, startSlackStandIn } from '../../sim/slack/server.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { createUserGroups } from '../../src/slack/user-groups.ts';
import { SlackApi } from '../../src/slack-api/client.ts';

// User group members through the real Web API client against the Slack stand-in (its calls checked against the
// vendored method files), with a clock the test moves for the cache.
let slack: SlackStandIn;
let client: SlackApi;
const logs: string[] = [];
const logger = createLogger({ level: 'warn' }, { write: (line: string) => void logs.push(line) });

beforeAll(async () => {
  slack = await startSlackStandIn({ botToken: 'xoxb-groups-test' });
  client = new SlackApi({ apiUrl: slack.apiUrl, token: 'xoxb-groups-test' });
});
afterAll(async () => {
  expect(slack.problems).toEqual([]);
  await client.close();
  await slack.close();
});

describe('user groups', () => {
  it('caches members for minutes; a forced refresh asks again only after the gap', async () => {
    let now = 0;
    const groups = createUserGroups(client, {
      logger,
      cacheMs: 300_000,
      refreshGapMs: 15_000,
      clock: () => now,
    });
    slack.setUserGroup('S0CACHE', ['U0A']);
    const calls = () =>
      slack.callsOf('usergroups.users.list').filter((c) => c.args.usergroup === 'S0CACHE').length;
    expect(await groups.members('S0CACHE')).toEqual(['U0A']);
    slack.setUserGroup('S0CACHE', ['U0A', 'U0B']);
    now = 60_000;
    expect(await groups.members('S0CACHE')).toEqual(['U0A']);
    expect(calls()).toBe(1);
    // A click by someone the cache does not list: refreshed, since the last ask is older than the gap.
    expect(await groups.members('S0CACHE', true)).toEqual(['U0A', 'U0B']);
    expect(calls()).toBe(2);
    // Another such click moments later does not ask Slack again.
    now += 5_000;
    expect(await groups.members('S0CACHE', true)).toEqual(['U0A', 'U0B']);
    expect(calls()).toBe(2);
    now += 300_000;
    await groups.members('S0CACHE');
    expect(calls()).toBe(3);
  });

  it('concurrent lookups share one call', async () => {
    const groups = createUserGroups(client, { logger });
    slack.setUserGroup('S0BUSY', ['U0X']);
    const answers = await Promise.all(Array.from({ length: 20 }, () => groups.members('S0BUSY')));
    expect(answers.every((a) => a?.[0] === 'U0X')).toBe(true);
    expect(slack.callsOf('usergroups.users.list').filter((c) => c.args.usergroup === 'S0BUSY')).toHaveLength(
      1,
    );
  });

  it('a group Slack will not resolve grants nobody, is logged, and says why', async () => {
    const groups = createUserGroups(client, { logger });
    slack.setUserGroup('S0SCOPE', { error: 'missing_scope' });
    expect(await groups.members('S0SCOPE')).toBeUndefined();
    expect(await groups.members('S0UNKNOWN')).toBeUndefined();
    expect(await groups.problem('S0SCOPE')).toBe('missing_scope');
    expect(await groups.problem('S0UNKNOWN')).toBe('no_such_subteam');
    expect(
      logs.some((l) => l.includes('S0SCOPE') && l.includes('missing_scope') && l.includes('grants nobody')),
    ).toBe(true);
  });

  it('Slack out of reach keeps what was known instead of dropping every member', async () => {
    let now = 0;
    const groups = createUserGroups(client, { logger, cacheMs: 1_000, clock: () => now });
    slack.setUserGroup('S0KEEP', ['U0K']);
    expect(await groups.members('S0KEEP')).toEqual(['U0K']);
    now = 5_000;
    slack.failNext('usergroups.users.list', { status: 500 });
    expect(await groups.members('S0KEEP')).toEqual(['U0K']);
  });
});
