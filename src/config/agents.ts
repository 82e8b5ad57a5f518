import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { verifySchema } from './verification-policy.ts';

/** What an agent may ask for (`may:` in the policy). */
export const AGENT_MAY = ['resize_up', 'resize_down', 'restore', 'lease'] as const;
export type AgentMay = (typeof AGENT_MAY)[number];

/** Requests an agent may make per hour when the policy does not say. */
export const DEFAULT_REQUESTS_PER_HOUR = 10;

/**
 * One agent of the policy's `agents:` list (docs/agents.md): who it is in Slack and the audit, the SHA-256 of its
 * bearer token, the person accountable for it, and what it may ask for.
 */
const agentSchema = z
  .object({
    name: z.string().regex(/^[a-z0-9][a-z0-9._-]{0,62}$/i, {
      message: 'expected a short name of letters, digits, ".", "_" or "-"',
    }),
    token_sha256: z
      .string({
        // A hash of digits only is read by YAML as a number: say what to do rather than "expected text".
        error: (issue) =>
          typeof issue.input === 'number'
            ? 'expected the SHA-256 as 64 hex digits in quotes: YAML reads digits alone as a number, so quote it ("…")'
            : undefined,
      })
      .regex(/^[0-9a-f]{64}$/i, {
        message: 'expected the SHA-256 of the token as 64 hex digits (cloudops agents token prints it)',
      }),
    on_behalf_of: z
      .string()
      .regex(/^[UW][A-Z0-9]+$/, { message: 'expected a Slack user id such as U0123ABC' }),
    projects: z.array(z.string().min(1)).default([]),
    may: z
      .array(z.enum(AGENT_MAY, { message: `expected one of ${AGENT_MAY.join(', ')}` }))
      .default(['resize_up']),
    max_monthly_delta: z
      .number({ message: 'expected an amount per month, such as 200' })
      .nonnegative({ message: 'expected an amount per month, 0 or more' })
      .optional(),
    requests_per_hour: z
      .number({ message: 'expected a whole number of requests per hour, 1 or more' })
      .int({ message: 'expected a whole number of requests per hour, 1 or more' })
      .min(1, { message: 'expected a whole number of requests per hour, 1 or more' })
      .max(10_000, { message: 'expected at most 10000 requests per hour' })
      .default(DEFAULT_REQUESTS_PER_HOUR),
    unattended: z.boolean({ message: 'expected true or false' }).default(false),
    /** Every request this agent makes needs a verified approval (a rule's own `verify:` names the methods). */
    verify: verifySchema.optional(),
  })
  .strict();

/** The policy's `agents:` section. */
export const agentsSchema = z.array(agentSchema).default([]);

export type AgentPolicy = z.infer<typeof agentSchema>;

/**
 * Cross-checks of `agents:` against the rest of the policy, reported like the policy's own: a name or token used
 * twice, a project that does not exist.
 */
export function checkAgents(
  policy: { agents: AgentPolicy[]; projects: { name: string; uuid: string }[] },
  ctx: z.RefinementCtx,
): void {
  const names = new Set<string>();
  const hashes = new Set<string>();
  const projects = new Set(policy.projects.flatMap((p) => [p.name.toLowerCase(), p.uuid.toLowerCase()]));
  policy.agents.forEach((agent, index) => {
    const name = agent.name.toLowerCase();
    if (names.has(name))
      ctx.addIssue({ code: 'custom', path: ['agents', index, 'name'], message: `duplicate agent ${name}` });
    names.add(name);
    const hash = agent.token_sha256.toLowerCase();
    if (hashes.has(hash))
      ctx.addIssue({
        code: 'custom',
        path: ['agents', index, 'token_sha256'],
        message: 'another agent has the same token: give each agent its own',
      });
    hashes.add(hash);
    agent.projects.forEach((project, p) => {
      if (!projects.has(project.toLowerCase()))
        ctx.addIssue({
          code: 'custom',
          path: ['agents', index, 'projects', p],
          message: `no project ${project} in this policy`,
        });
    });
  });
}

/** The SHA-256 of a bearer token, as hex: what the policy stores instead of the token. */
export function tokenHash(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

/** A new agent token: 32 random bytes, base64url, with a prefix that says what it is when it turns up somewhere. */
export function newAgentToken(): string {
  return `cloudops_agent_${randomBytes(32).toString('base64url')}`;
}

/**
 * The agent whose token this is, or undefined. The token's hash is compared with every agent's in constant time
 * (each comparison the same length, none cut short), so the answer's timing says nothing about any stored hash.
 */
export function agentForToken(agents: readonly AgentPolicy[], token: string): AgentPolicy | undefined {
  const presented = Buffer.from(tokenHash(token), 'hex');
  let found: AgentPolicy | undefined;
  for (const agent of agents) {
    const stored = Buffer.from(agent.token_sha256.toLowerCase(), 'hex');
    if (timingSafeEqual(stored, presented) && !found) found = agent;
  }
  return found;
}

/** The agent named `name` (case-insensitive). */
export function findAgent(agents: readonly AgentPolicy[], name: string): AgentPolicy | undefined {
  const key = name.toLowerCase();
  return agents.find((a) => a.name.toLowerCase() === key);
}
