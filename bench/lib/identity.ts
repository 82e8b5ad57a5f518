import { sealKeysFrom } from '../../src/config/seal-keys.ts';

/** The fixed Slack and policy identities every bench scenario uses (no real workspace behind them). */
export const BENCH = {
  teamId: 'T0BENCH',
  channel: 'C0BENCH',
  requester: 'U0REQUESTER',
  approver: 'U0APPROVER',
  project: 'bench',
  cluster: 'zone-1',
  botToken: 'xoxb-bench-token',
  signingSecret: 'bench-signing-secret-0123456789abcdef',
  /** SEAL_KEY: every role needs one, and the bot never makes one up. */
  sealKey: '5be9c1d07a3e4f2b8c6d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d',
} as const;

/** The keys of {@link BENCH.sealKey}, as the bench's bots hold them: what the bench's own setup seals with. */
export const BENCH_SEAL_KEYS = sealKeysFrom(BENCH.sealKey);

/** The bench policy as YAML: one project bound to the bench channel with one approver, as an admin would write it. */
export function benchPolicyYaml(projectUuid: string): string {
  return [
    `workspace: ${BENCH.teamId}`,
    'currency: EUR',
    `approvers: [${BENCH.approver}]`,
    'approval_ttl_hours: 24',
    // One requester makes every request of a run: the per-person limit would otherwise cut the run short.
    'requests_per_hour: 10000',
    'projects:',
    `  - name: ${BENCH.project}`,
    `    uuid: ${projectUuid}`,
    `    cluster: ${BENCH.cluster}`,
    `    channels: [${BENCH.channel}]`,
    `    approvers: [${BENCH.approver}]`,
    '',
  ].join('\n');
}
