import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CHANNELS,
  type Harness,
  POLICY_HEAD,
  PROD_UUID,
  PROD_VMS,
  STAGING_UUID,
  startHarness,
  USERS,
} from '../helpers/harness.ts';

// Who may ask (`requesters:`) and how often (`requests_per_hour`), end to end: signed HTTP into the web role, the
// Slack stand-in answering usergroups.users.list.
const DEVOPS = 'U0DEVOPS';

const policyYaml = `
${POLICY_HEAD.replace('requests_per_hour: 10000', 'requests_per_hour: 2')}
projects:
  - name: shop-prod
    uuid: ${PROD_UUID}
    cluster: zone-1
    channels: [${CHANNELS.prod}]
    approvers: [${USERS.lead}, ${USERS.lead2}]
    requesters: [${USERS.dev}, S0DEVOPS]
    vms:
${PROD_VMS}
  - name: shop-staging
    uuid: ${STAGING_UUID}
    cluster: zone-2
    channels: [${CHANNELS.staging}]
    approvers: [${USERS.lead}]
    vms:
      - { vmid: 201, name: staging-1, cores: 1, ram_gb: 2, os_disk_gb: 20, cpu_class: light, wan_mode: ipv6 }
`;

let h: Harness;

beforeAll(async () => {
  h = await startHarness({ policyYaml, userGroups: { S0DEVOPS: [DEVOPS] } });
});

afterAll(async () => {
  await h?.close();
});

async function ephemeralsAfter(channel: string, user: string, seen: number): Promise<string[]> {
  await h.slack.waitFor(() => h.slack.ephemerals(channel, user).length > seen);
  return h.slack.ephemerals(channel, user).map((m) => m.text ?? '');
}

/** Submits a resize form as `user`; the ephemeral answer when it was refused, else the request it made. */
async function ask(text: string, user: string, channel: string) {
  const seen = h.slack.ephemerals(channel, user).length;
  const before = (await h.requests(channel)).length;
  const ack = await h.fillAndSubmit(text, {}, user, channel);
  expect(ack.json).toEqual({ response_action: 'clear' });
  const deadline = Date.now() + 20_000;
  let made = false;
  while (Date.now() < deadline) {
    made = (await h.requests(channel)).length > before;
    if (made || h.slack.ephemerals(channel, user).length > seen) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return made
    ? { made: true as const }
    : { made: false as const, said: (await ephemeralsAfter(channel, user, seen)).at(-1) };
}

describe('requesters: who may ask in a project', () => {
  it('a person the project’s requesters do not name is refused with a clear message; nothing is stored', async () => {
    const answer = await ask('resize shop-prod 102 cores=6', USERS.dev2, CHANNELS.prod);
    expect(answer).toEqual({
      made: false,
      said: `:no_entry: Not requested: <@${USERS.dev2}> may not ask for changes in shop-prod: the policy names who may (requesters), so ask one of them or an admin.`,
    });
    const audit = await h.redis.xrange(`${h.prefix}:audit`, '-', '+');
    expect(audit).toEqual([]);
  });

  it('a named user and a member of a named user group may ask', async () => {
    expect(await ask('resize shop-prod 102 cores=6', USERS.dev, CHANNELS.prod)).toEqual({ made: true });
    expect(await ask('resize shop-prod 101 cores=4', DEVOPS, CHANNELS.prod)).toEqual({ made: true });
  });

  it('a project without requesters lets anyone in its channels ask, as before', async () => {
    expect(await ask('resize shop-staging 201 cores=2', USERS.dev2, CHANNELS.staging)).toEqual({
      made: true,
    });
  });
});

describe('requests_per_hour: each person’s requests are limited as an agent’s are', () => {
  it('past the limit a person is told when they may ask again; others are not affected', async () => {
    // USERS.dev made one request above; one more fits, the third of the hour does not.
    expect(await ask('resize shop-prod 102 ram=16', USERS.dev, CHANNELS.prod)).toEqual({ made: true });
    const third = await ask('resize shop-prod 102 disk=200', USERS.dev, CHANNELS.prod);
    expect(third.made).toBe(false);
    expect(third.said).toMatch(
      new RegExp(
        `^:no_entry: Not requested: <@${USERS.dev}> made 2 requests in the last hour \\(the policy's requests_per_hour\\); you may ask again at \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d UTC\\.$`,
      ),
    );
    // A refused request did not count: dev2 has made one (staging) and may make another.
    expect(await ask('resize shop-staging 201 ram=4', USERS.dev2, CHANNELS.staging)).toEqual({ made: true });
  });
});
