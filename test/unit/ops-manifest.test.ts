import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv } from 'ajv';
import addFormatsPlugin from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { DESCRIBED_HERE } from '../../sim/slack/checks.ts';

// The Slack reference data is kept in the repository (vendor/README.md says where it came from).
const repo = fileURLToPath(new URL('../../', import.meta.url));
const reference = fileURLToPath(new URL('../../vendor/slack-reference/', import.meta.url));
const SCHEMA_URL = 'https://raw.githubusercontent.com/slackapi/manifest-schema/v0.5.0/schemas/';

interface Manifest {
  oauth_config?: { scopes?: { bot?: string[]; user?: string[] } };
  settings?: {
    interactivity?: { is_enabled?: boolean };
    socket_mode_enabled?: boolean;
    org_deploy_enabled?: boolean;
    event_subscriptions?: { bot_events?: string[] };
  };
  functions?: Record<
    string,
    { input_parameters: Record<string, unknown>; output_parameters: Record<string, unknown> }
  >;
  features?: {
    slash_commands?: { command: string; usage_hint?: string }[];
    app_home?: { home_tab_enabled?: boolean };
  };
}

const manifest = parse(readFileSync(join(repo, 'manifest.yml'), 'utf8')) as Manifest;
/** manifest.yml plus the Workflow Builder steps, which need a paid plan (docs/slack.md#workflow-builder-steps). */
const withSteps = parse(readFileSync(join(repo, 'manifest.steps.yml'), 'utf8')) as Manifest & {
  settings?: { function_runtime?: string };
};
const botScopes = manifest.oauth_config?.scopes?.bot ?? [];

/** ajv-formats is CommonJS: under NodeNext its default import is the module object or the function itself. */
const addFormats = ((addFormatsPlugin as unknown as { default?: typeof addFormatsPlugin }).default ??
  addFormatsPlugin) as unknown as (ajv: Ajv) => Ajv;

function readJson(path: string): Record<string, unknown> {
  return JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
}

/** Every `.ts` file under `dir`, recursively. */
function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return tsFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

// Web API namespaces a bot may call; `x.chat.postMessage(`, also split over lines, and `apiCall('chat.postMessage'`
// or the lean client's `call('views.open'` / `call<Answer>('conversations.replies'`.
const NAMESPACES =
  'admin|apps|auth|bookmarks|bots|calls|chat|conversations|dnd|emoji|files|functions|pins|reactions|reminders|search|team|usergroups|users|views';
const METHOD_CALL = new RegExp(
  `\\.\\s*(${NAMESPACES})\\s*\\.\\s*([A-Za-z]+(?:\\s*\\.\\s*[A-Za-z]+)?)\\s*\\(`,
  'g',
);
const API_CALL = /\b(?:apiCall|call)\s*(?:<[^>]*>)?\s*\(\s*['"`]([a-z]+(?:\.[A-Za-z]+)+)['"`]/g;
const ARRAY_METHODS = new Set(Object.getOwnPropertyNames(Array.prototype));
/**
 * Methods called only where Slack granted a scope the manifest does not ask for: `cloudops doctor` looks at channel
 * membership with conversations.info when channels:read or groups:read is there, and says which scope would otherwise.
 */
const OPTIONAL_SCOPE_CALLS = new Set(['conversations.info']);
/**
 * Scopes that no method requires but that add fields to a method's answer: the profile's email in users.info
 * (verify: sso compares it with the SSO login's). Used when that method is called.
 */
const FIELD_SCOPES: Record<string, string> = { 'users:read.email': 'users.info' };
/** WebClient helpers that are not Web API methods themselves, and the methods they call. */
const HELPERS: Record<string, string[]> = {
  'files.uploadV2': ['files.getUploadURLExternal', 'files.completeUploadExternal'],
};

/** Web API methods the source calls, each with the files that call it. */
function methodsCalled(): Map<string, string[]> {
  const found = new Map<string, string[]>();
  const add = (method: string, file: string) => {
    for (const m of HELPERS[method] ?? [method]) found.set(m, [...(found.get(m) ?? []), file]);
  };
  for (const file of tsFiles(join(repo, 'src'))) {
    const text = readFileSync(file, 'utf8');
    const where = relative(repo, file);
    for (const match of text.matchAll(METHOD_CALL)) {
      const method = match[2]!.replace(/\s/g, '');
      // `slack.calls.slice(` or `stand.views.filter(` is an array, not the Web API.
      if (ARRAY_METHODS.has(method.split('.')[0]!)) continue;
      add(`${match[1]}.${method}`, where);
    }
    for (const match of text.matchAll(API_CALL)) add(match[1]!, where);
  }
  return found;
}

/** The bot scopes a method accepts (any one of them suffices), from the reference method file. */
function botScopesOf(method: string): string[] {
  const described = DESCRIBED_HERE[method];
  if (described) return described.botScopes;
  const file = readJson(join(reference, 'methods', `${method}.json`));
  const scope = file.scope as { bot?: string[] } | undefined;
  return scope?.bot ?? [];
}

/** The root manifest schema with both versioned schemas added under their absolute URLs (no network). */
function manifestValidator() {
  const ajv = new Ajv({ strict: false, allErrors: true });
  addFormats(ajv);
  for (const version of ['1.0.0', '2.0.0']) {
    ajv.addSchema(
      readJson(join(reference, 'manifest', 'schemas', `manifest.schema.${version}.json`)),
      `${SCHEMA_URL}manifest.schema.${version}.json`,
    );
  }
  return ajv.compile(readJson(join(reference, 'manifest', 'manifest.schema.json')));
}

describe('manifest.yml', () => {
  it.each([
    ['manifest.yml', manifest],
    ['manifest.steps.yml', withSteps],
  ])('%s is a valid Slack app manifest (draft-07 schema, offline)', (_name, candidate) => {
    const validate = manifestValidator();
    const valid = validate(candidate);
    expect(validate.errors ?? [], JSON.stringify(validate.errors, null, 2)).toEqual([]);
    expect(valid).toBe(true);
  });

  it('the schema check rejects a broken manifest (so the check above means something)', () => {
    const validate = manifestValidator();
    const broken = structuredClone(manifest) as Manifest & { features: { slash_commands: object[] } };
    broken.features.slash_commands = [{ command: 'cloud' }];
    expect(validate(broken)).toBe(false);
  });

  it('declares /cloud with a usage hint, interactivity and Socket Mode', () => {
    const cloud = manifest.features?.slash_commands?.find((c) => c.command === '/cloud');
    expect(cloud?.usage_hint).toMatch(/resize/);
    expect(cloud?.usage_hint).toMatch(/restore/);
    expect(cloud?.usage_hint).toMatch(/digest/);
    expect(manifest.settings?.interactivity?.is_enabled).toBe(true);
    expect(manifest.settings?.socket_mode_enabled).toBe(true);
    // A bot token only: the bot never acts as a user.
    expect(manifest.oauth_config?.scopes?.user ?? []).toEqual([]);
  });

  it('the scan finds the Web API calls the source makes', () => {
    const methods = methodsCalled();
    // The modals and refusals exist today; if these vanish the scan, not the code, is broken.
    expect(methods.has('views.open')).toBe(true);
    expect(methods.has('chat.postEphemeral')).toBe(true);
  });

  it('grants a bot scope for every Web API method the source calls', () => {
    const missing: string[] = [];
    for (const [method, files] of methodsCalled()) {
      const accepted = botScopesOf(method);
      if (OPTIONAL_SCOPE_CALLS.has(method)) continue;
      if (accepted.length > 0 && !accepted.some((scope) => botScopes.includes(scope))) {
        missing.push(`${method} (called in ${files.join(', ')}) needs one of ${accepted.join(', ')}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it('every method the source calls has a reference file, so its scope is known', () => {
    const known = new Set(readdirSync(join(reference, 'methods')).map((f) => f.replace(/\.json$/, '')));
    // The few no copied file covers are described from Slack's documentation in the stand-in's checks.
    for (const method of Object.keys(DESCRIBED_HERE)) known.add(method);
    const unknown = [...methodsCalled().keys()].filter((method) => !known.has(method));
    expect(unknown).toEqual([]);
  });

  it('grants no bot scope that nothing uses', () => {
    const used = new Set<string>();
    if ((manifest.features?.slash_commands ?? []).length > 0) used.add('commands');
    for (const method of methodsCalled().keys()) {
      if (OPTIONAL_SCOPE_CALLS.has(method)) continue;
      for (const scope of botScopesOf(method)) used.add(scope);
    }
    for (const [scope, method] of Object.entries(FIELD_SCOPES))
      if (methodsCalled().has(method)) used.add(scope);
    expect(botScopes.filter((scope) => !used.has(scope))).toEqual([]);
    expect(new Set(botScopes).size).toBe(botScopes.length);
  });

  it('declares the App Home with only the event it needs, and nothing that needs a paid plan', () => {
    expect(manifest.features?.app_home?.home_tab_enabled).toBe(true);
    expect(manifest.settings?.event_subscriptions?.bot_events).toEqual(['app_home_opened']);
    // Custom steps (functions) need a paid plan and an org-ready app: they live in manifest.steps.yml.
    expect(manifest.functions).toBeUndefined();
    expect(manifest.settings?.org_deploy_enabled).toBeUndefined();
    expect(methodsCalled().has('views.publish')).toBe(true);
  });
});

describe('manifest.steps.yml', () => {
  it('declares the two workflow steps, their event and an org-ready app run by this bot', () => {
    expect(withSteps.settings?.event_subscriptions?.bot_events).toEqual([
      'app_home_opened',
      'function_executed',
    ]);
    expect(withSteps.settings?.org_deploy_enabled).toBe(true);
    expect(withSteps.settings?.function_runtime).toBe('remote');
    expect(Object.keys(withSteps.functions ?? {})).toEqual(['request_vm_resize', 'request_vm_restore']);
    const methods = methodsCalled();
    for (const method of ['functions.completeSuccess', 'functions.completeError'])
      expect(methods.has(method), method).toBe(true);
  });

  it('is manifest.yml plus the steps and nothing else, so the two cannot drift apart', () => {
    const { functions: _steps, ...rest } = structuredClone(withSteps);
    const settings = rest.settings!;
    delete settings.org_deploy_enabled;
    delete settings.function_runtime;
    settings.event_subscriptions!.bot_events = settings.event_subscriptions!.bot_events!.filter(
      (event) => event !== 'function_executed',
    );
    expect(rest).toEqual(manifest);
  });
});
