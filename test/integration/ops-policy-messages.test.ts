import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { START_ARGS } from '../helpers/bot-process.ts';
import { runProcess } from '../helpers/run-process.ts';
import { TEST_SEAL_KEY } from '../helpers/seal.ts';

// A policy file with several problems, through both doors an operator uses: `npm start` (the compiled bot in its
// own process) and `cloudops policy check` (the shipped binary). Each lists every problem at once, in file order,
// each with file:line and field; a typo is named with the key it meant; a wrong type is said in words.
const repo = fileURLToPath(new URL('../../', import.meta.url));
const BIN = join(repo, 'bin', 'cloudops.mjs');

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(args: string[], env: Record<string, string>, cwd: string): Promise<Run> {
  return runProcess(process.execPath, args, {
    cwd,
    env: { PATH: process.env.PATH ?? '', ...env },
    timeoutMs: 45_000,
  });
}

const SECRETS = {
  SLACK_BOT_TOKEN: 'xoxb-0000-0000-policymessages',
  SLACK_SIGNING_SECRET: 'policy-messages-signing-secret',
  CLOUD_API_URL: 'http://127.0.0.1:9/',
  CLOUD_API_KEY: 'policy-messages-api-key',
  SEAL_KEY: TEST_SEAL_KEY,
};

const SEVERAL = `workspace: T0001
aprovers: [U0ADMIN]
retention_days: 1.5
projects:
  - name: shop-prod
    uuid: 0b6f7c1e-3d2a-4c55-9a53-2f1a4e8b9c10
    chanels: [C0PROD]
    approvers: [U0LEAD, U0LEAD2]
    approvals:
      rules:
        - { when: { monthly_delta_under: 0.0000001 }, count: 0 }
    vms:
      - { vmid: "102", cores: 2 }
  - name: shop-dev
    uuid: 1b6f7c1e-3d2a-4c55-9a53-2f1a4e8b9c10
    channels: C0DEV
    approvers: [U0LEAD]
`;

/** The problems of SEVERAL, in file order, as `file:line: field: message`. */
const problems = (file: string) => [
  `${file}:2: aprovers: unknown key, did you mean \`approvers\`?`,
  `${file}:3: retention_days: expected a whole number of days`,
  `${file}:7: projects[0].chanels: unknown key, did you mean \`channels\`?`,
  `${file}:11: projects[0].approvals.rules[0].when.monthly_delta_under: expected an amount per month such as 100 or -20.5, with at most 15 digits before the point and 6 after`,
  `${file}:13: projects[0].vms[0].vmid: expected a whole number, not the text "102" (write it without quotes)`,
  `${file}:16: projects[1].channels: expected a list of channel ids, not the text "C0DEV"`,
];

let dir: string;
let file: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cloudops-policy-messages-'));
  file = join(dir, 'policy.yml');
  await writeFile(file, SEVERAL);
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe.concurrent('a policy file with several problems', { timeout: 120_000 }, () => {
  it('npm start lists them all, each with file:line and field, and exits 1 before connecting anywhere', async () => {
    const started = await run(START_ARGS, { ...SECRETS, POLICY_FILE: file }, dir);
    expect(started.code).toBe(1);
    expect(started.stderr.trimEnd().split('\n')).toEqual([
      `cloudops: ${file}: 6 problems:`,
      ...problems(file).map((line) => `  ${line}`),
    ]);
    expect(started.stdout).toBe('');
    for (const secret of Object.values(SECRETS)) expect(started.stderr).not.toContain(secret);
  });

  it('cloudops policy check lists the same, and with --json gives them as data', async () => {
    const checked = await run([BIN, 'policy', 'check', file], {}, dir);
    expect(checked.code).toBe(1);
    expect(checked.stderr.trimEnd().split('\n')).toEqual([
      `cloudops: ${file}: 6 problems:`,
      ...problems(file).map((line) => `  ${line}`),
    ]);
    expect(checked.stderr).not.toMatch(/\n\s+at /);

    const json = await run([BIN, 'policy', 'check', file, '--json'], {}, dir);
    expect(json.code).toBe(1);
    expect(json.stderr).toBe('');
    const out = JSON.parse(json.stdout) as {
      ok: boolean;
      total: number;
      problems: { line: number; field: string; message: string }[];
    };
    expect(out).toMatchObject({ ok: false, file, total: 6 });
    expect(out.problems.map((p) => `${file}:${p.line}: ${p.field}: ${p.message}`)).toEqual(problems(file));
  });

  it('an alias bomb is refused with the file and the line by both, before it is expanded', async () => {
    const bombFile = join(dir, 'bomb.yml');
    const levels = ['a: &a [x, x, x, x, x, x, x, x, x]'];
    for (const [i, name] of ['b', 'c', 'd', 'e', 'f', 'g', 'h', 'i'].entries()) {
      levels.push(
        `${name}: &${name} [${Array(9)
          .fill(`*${String.fromCharCode(97 + i)}`)
          .join(', ')}]`,
      );
    }
    await writeFile(bombFile, `approvers: [U0ADMIN]\n${levels.join('\n')}\n`);
    const expected = `cloudops: ${bombFile}:3: not valid YAML: its aliases (*name) expand to more than 100 copies; write the values out`;
    const [started, checked] = await Promise.all([
      run(START_ARGS, { ...SECRETS, POLICY_FILE: bombFile }, dir),
      run([BIN, 'policy', 'check', bombFile], {}, dir),
    ]);
    for (const result of [started, checked]) {
      expect(result.code).toBe(1);
      expect(result.stderr).toBe(`${expected}\n`);
    }
  });
});
