/**
 * The bot scopes manifest.yml asks for, with what stops working without each; `cloudops doctor` compares them with
 * the scopes Slack granted (test/unit/doctor-scopes.test.ts keeps the list equal to the manifest's).
 */
export const BOT_SCOPES: Readonly<Record<string, string>> = {
  commands: 'the /cloud command',
  'chat:write': 'request messages, thread replies and digests',
  'usergroups:read': 'approvers named by user group (S… ids in the policy)',
  'channels:history': 'finding a reply already posted after a crash (public channels)',
  'groups:history': 'finding a reply already posted after a crash (private channels)',
  'files:write': 'the price chart in each digest and in /cloud cluster (the text goes out without it)',
  'users:read': "approvers' emails for verify: sso (users.info)",
  'users:read.email': "approvers' emails for verify: sso, compared with the SSO login's",
};

/** Scopes whose absence only turns a feature off (no price charts): doctor warns instead of failing. */
export const OPTIONAL_SCOPES: ReadonlySet<string> = new Set([
  'files:write',
  // Needed only where the policy says verify: sso; doctor's verify.slack-email check fails then.
  'users:read',
  'users:read.email',
]);

/** Scopes that let the bot look at a channel (conversations.info): public, private. */
export const CHANNEL_READ_SCOPES = { public: 'channels:read', private: 'groups:read' } as const;
