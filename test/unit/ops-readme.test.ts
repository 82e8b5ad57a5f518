import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadEnv } from '../../src/config/env.ts';

const read = (file: string) => readFileSync(fileURLToPath(new URL(`../../${file}`, import.meta.url)), 'utf8');
const readme = read('README.md');

/** The variables the bot reads, REDIS_PREFIX included. */
const VARIABLES = [
  'SLACK_BOT_TOKEN',
  'SLACK_SIGNING_SECRET',
  'SLACK_APP_TOKEN',
  'SLACK_API_URL',
  'CLOUD_API_URL',
  'CLOUD_API_KEY',
  'CLOUD_API_DEADLINE_MS',
  'REDIS_URL',
  'REDIS_PREFIX',
  'REDIS_SENTINELS',
  'REDIS_SENTINEL_NAME',
  'PORT',
  'HOST',
  'METRICS_PORT',
  'METRICS_HOST',
  'POLICY_FILE',
  'ROLE',
  'LOG_LEVEL',
];

describe('README.md', () => {
  it('starts with the two commands: the demo and the tests', () => {
    expect(readme).toContain('npm ci && npm run demo');
    expect(readme).toContain('npm ci && npm test');
  });

  it('has a table row for every environment variable the bot reads', () => {
    // Variables with a default come back from loadEnv({}): the list above must not miss one.
    for (const name of Object.keys(loadEnv({}))) expect(VARIABLES).toContain(name);
    for (const name of VARIABLES) expect(readme).toMatch(new RegExp(`^\\| \`${name}\` \\|`, 'm'));
  });

  it('documents every top-level policy key and points to the example', () => {
    for (const key of [
      'workspace',
      'currency',
      'approvers',
      'approval_ttl_hours',
      'retention_days',
      'limits',
      'resize_fields',
      'reference_vm',
      'projects',
    ]) {
      expect(readme).toMatch(new RegExp(`^\\| \`${key}[\`.\\[]`, 'm'));
    }
    expect(readme).toContain('policy.example.yml');
  });

  it('keeps the sections operators look for', () => {
    for (const heading of [
      'Quick start',
      'Creating the Slack app',
      'The policy file',
      'Environment',
      'Running in production',
      'What the bot assumes where the API documentation is silent',
      'Troubleshooting',
      'Performance',
    ]) {
      expect(readme).toMatch(new RegExp(`^## ${heading}$`, 'm'));
    }
  });

  it('.ci/run installs from the lockfile and runs the README’s test command, failing on failure', () => {
    const ci = read('.ci/run');
    expect(ci).toMatch(/^set -euo pipefail$/m);
    expect(ci).toMatch(/^npm ci\b/m);
    expect(ci).toMatch(/^npm test$/m);
  });
});
