import { describe, expect, it } from 'vitest';
import { agentForToken, newAgentToken, tokenHash } from '../../src/config/agents.ts';
import { parsePolicy } from '../../src/config/policy.ts';

const HASH = tokenHash('token-of-deploy-agent');
const base = (agents: string) => `
approvers: [U0LEAD]
projects:
  - name: shop-prod
    uuid: 0b6f7c1e-3d2a-4c55-9a53-2f1a4e8b9c10
    channels: [C0PROD]
agents:
${agents}`;

describe('the policy’s agents section', () => {
  it('fills the documented defaults', () => {
    const policy = parsePolicy(
      base(`  - { name: deploy-agent, token_sha256: ${HASH}, on_behalf_of: U0DEV }`),
    );
    expect(policy.agents).toEqual([
      {
        name: 'deploy-agent',
        token_sha256: HASH,
        on_behalf_of: 'U0DEV',
        projects: [],
        may: ['resize_up'],
        requests_per_hour: 10,
        unattended: false,
      },
    ]);
    expect(parsePolicy('projects: []').agents).toEqual([]);
  });

  it('names the file, line and field of a mistake', () => {
    const cases: [string, string][] = [
      [
        `  - name: a\n    token_sha256: 9f86d08\n    on_behalf_of: U0DEV`,
        'p.yml:9: agents[0].token_sha256: expected the SHA-256 of the token as 64 hex digits (cloudops agents token prints it)',
      ],
      [
        `  - name: a\n    token_sha256: ${HASH}\n    on_behalf_of: U0DEV\n    projects: [shop-prod, shop-test]`,
        'p.yml:11: agents[0].projects[1]: no project shop-test in this policy',
      ],
      [
        `  - name: a\n    token_sha256: ${HASH}\n    on_behalf_of: U0DEV\n    may: [resize_up, delete]`,
        'p.yml:11: agents[0].may[1]: expected one of resize_up, resize_down, restore, lease',
      ],
      [
        `  - { name: a, token_sha256: ${HASH}, on_behalf_of: U0DEV }\n  - { name: b, token_sha256: ${HASH}, on_behalf_of: U0DEV }`,
        'p.yml:9: agents[1].token_sha256: another agent has the same token: give each agent its own',
      ],
      [
        `  - name: a\n    token_sha256: ${HASH}\n    on_behalf_of: dev`,
        'p.yml:10: agents[0].on_behalf_of: expected a Slack user id such as U0123ABC',
      ],
    ];
    for (const [agents, message] of cases) {
      expect(() => parsePolicy(base(agents), 'p.yml')).toThrow(message);
    }
  });

  it('says to quote a token_sha256 of digits only, which YAML reads as a number', () => {
    expect(() =>
      parsePolicy(base(`  - name: a\n    token_sha256: ${'7'.repeat(64)}\n    on_behalf_of: U0DEV`), 'p.yml'),
    ).toThrow(
      'p.yml:9: agents[0].token_sha256: expected the SHA-256 as 64 hex digits in quotes: YAML reads digits alone as a number, so quote it ("…")',
    );
  });

  it('finds the agent of a token by its SHA-256, and no agent for any other token', () => {
    const token = newAgentToken();
    expect(token).toMatch(/^cloudops_agent_[A-Za-z0-9_-]{43}$/);
    const policy = parsePolicy(
      base(
        `  - { name: a, token_sha256: ${HASH}, on_behalf_of: U0DEV }\n  - { name: b, token_sha256: ${tokenHash(token).toUpperCase()}, on_behalf_of: U0DEV }`,
      ),
    );
    expect(agentForToken(policy.agents, token)?.name).toBe('b');
    expect(agentForToken(policy.agents, 'token-of-deploy-agent')?.name).toBe('a');
    expect(agentForToken(policy.agents, newAgentToken())).toBeUndefined();
    expect(agentForToken(policy.agents, '')).toBeUndefined();
  });
});
