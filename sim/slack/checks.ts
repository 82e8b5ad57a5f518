import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ValidateFunction } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';

/** Where the third-party Slack reference files live, in the repository (see vendor/README.md). */
export const SLACK_REFERENCE_DIR = join(
  dirname(fileURLToPath(import.meta.url)),
  '..',
  '..',
  'vendor',
  'slack-reference',
);

/** Slack's per-surface limits that the Block Kit schema does not enforce. */
export const LIMITS = { messageBlocks: 50, modalBlocks: 100, textChars: 3000 } as const;

/** One thing the bot sent that real Slack would refuse. */
export interface Problem {
  /** The Web API method, or `response_url` / `ack` for payloads that did not go through the Web API. */
  method: string;
  why: string;
}

interface MethodArgs {
  required: string[];
  properties: Record<string, unknown>;
}

/** The method files: name → required and known arguments. */
function loadMethods(dir: string): Map<string, MethodArgs> {
  const methods = new Map<string, MethodArgs>();
  for (const file of readdirSync(join(dir, 'methods'))) {
    if (!file.endsWith('.json')) continue;
    const parsed = JSON.parse(readFileSync(join(dir, 'methods', file), 'utf8')) as {
      args?: { required?: string[]; properties?: Record<string, unknown> };
    };
    methods.set(file.slice(0, -'.json'.length), {
      required: parsed.args?.required ?? [],
      properties: parsed.args?.properties ?? {},
    });
  }
  for (const [name, described] of Object.entries(DESCRIBED_HERE))
    if (!methods.has(name))
      methods.set(name, { required: described.required, properties: described.properties });
  return methods;
}

/**
 * Methods the bot calls that no copied reference file covers, described here from Slack's documentation of each
 * (docs.slack.dev/reference/methods/<name>): the required and the accepted arguments, and the bot scopes of which
 * any one suffices (test/unit/ops-manifest.test.ts reads them as it reads a reference file's).
 */
export const DESCRIBED_HERE: Record<string, MethodArgs & { botScopes: string[] }> = {
  // Reads a channel's messages, newest first; the bot looks for its own request message by its metadata.
  'conversations.history': {
    botScopes: ['channels:history', 'groups:history', 'im:history', 'mpim:history'],
    required: ['channel'],
    properties: Object.fromEntries(
      ['channel', 'cursor', 'include_all_metadata', 'inclusive', 'latest', 'limit', 'oldest'].map((n) => [
        n,
        {},
      ]),
    ),
  },
};

/** Arguments that depend on each other, which the method files cannot express as `required`. */
const ONE_OF_REQUIRED: Record<string, string[]> = {
  'views.open': ['trigger_id', 'interactivity_pointer'],
  'views.push': ['trigger_id', 'interactivity_pointer'],
  'views.update': ['view_id', 'external_id'],
  'chat.postMessage': ['text', 'blocks', 'attachments', 'markdown_text'],
};

/** Arguments Slack accepts on every method although the files do not list them (Bolt adds `team_id`). */
const ALWAYS_ALLOWED = new Set(['token', 'team_id']);

interface Validators {
  blocks: ValidateFunction;
  modal: ValidateFunction;
  home: ValidateFunction;
}

/** Compiled validators per reference directory: pure functions, so stand-ins in one process share them. */
const COMPILED = new Map<string, Validators>();

/**
 * Checks Web API calls and Block Kit payloads the way Slack would refuse them: method files for arguments, the
 * Block Kit schema for blocks and views, and the per-surface limits the schema leaves out.
 */
export class SlackChecks {
  private readonly methods: Map<string, MethodArgs>;
  private validators?: Validators;

  constructor(private readonly dir = SLACK_REFERENCE_DIR) {
    this.methods = loadMethods(dir);
  }

  /** Whether a method file exists for `method`. */
  knows(method: string): boolean {
    return this.methods.has(method);
  }

  /** Argument problems of one call: unknown method, missing required argument, unknown argument. */
  checkArgs(method: string, args: Record<string, unknown>): string[] {
    const spec = this.methods.get(method);
    if (!spec) return [`no method file for ${method}`];
    const problems: string[] = [];
    for (const name of spec.required) {
      if (name === 'token') continue;
      if (args[name] === undefined || args[name] === '')
        problems.push(`required argument \`${name}\` is missing`);
    }
    const oneOf = ONE_OF_REQUIRED[method];
    if (oneOf && !oneOf.some((name) => args[name] !== undefined && args[name] !== '')) {
      problems.push(`one of ${oneOf.map((n) => `\`${n}\``).join(', ')} is required`);
    }
    for (const name of Object.keys(args)) {
      if (!ALWAYS_ALLOWED.has(name) && !(name in spec.properties))
        problems.push(`unknown argument \`${name}\``);
    }
    return problems;
  }

  /** Problems of a message's `blocks`: the schema, at most 50 blocks, at most 3000 characters per text object. */
  checkMessageBlocks(blocks: unknown): string[] {
    if (!Array.isArray(blocks)) return ['`blocks` is not an array'];
    const problems: string[] = [];
    if (blocks.length > LIMITS.messageBlocks) {
      problems.push(`${blocks.length} blocks in a message (Slack allows ${LIMITS.messageBlocks})`);
    }
    const validate = this.compiled().blocks;
    if (!validate(blocks)) problems.push(...schemaErrors(validate));
    problems.push(...longTexts(blocks, 'blocks'));
    return problems;
  }

  /** Problems of a view: the modal (or home) schema, at most 100 blocks, at most 3000 characters per text object. */
  checkView(view: unknown): string[] {
    if (typeof view !== 'object' || view === null) return ['`view` is not an object'];
    const type = (view as { type?: unknown }).type;
    const blocks = (view as { blocks?: unknown }).blocks;
    const problems: string[] = [];
    if (Array.isArray(blocks) && blocks.length > LIMITS.modalBlocks) {
      problems.push(`${blocks.length} blocks in a view (Slack allows ${LIMITS.modalBlocks})`);
    }
    const validate = type === 'home' ? this.compiled().home : this.compiled().modal;
    if (!validate(view)) problems.push(...schemaErrors(validate));
    problems.push(...longTexts(view, 'view'));
    return problems;
  }

  /** Compiles the Block Kit schema now instead of on the first check. */
  warmUp(): void {
    this.compiled();
  }

  /** Compiles the Block Kit schema on first use (it is large); instances on the same files share the result. */
  private compiled(): Validators {
    this.validators ??= COMPILED.get(this.dir);
    if (this.validators) return this.validators;
    const schema = JSON.parse(readFileSync(join(this.dir, 'block-kit.schema.json'), 'utf8')) as {
      $id: string;
    };
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    // ajv-formats is CommonJS: under NodeNext its default import is the module object or the function itself.
    const addFormats = ((addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ??
      addFormatsModule) as unknown as (instance: Ajv2020) => Ajv2020;
    addFormats(ajv);
    ajv.addSchema(schema);
    const blocks = ajv.getSchema(schema.$id);
    if (!blocks) throw new Error('the Block Kit schema did not compile');
    this.validators = {
      blocks,
      modal: ajv.compile({ $ref: `${schema.$id}#/$defs/modal_view` }),
      home: ajv.compile({ $ref: `${schema.$id}#/$defs/home_view` }),
    };
    COMPILED.set(this.dir, this.validators);
    return this.validators;
  }
}

/** ajv's errors as one line; a failed `oneOf`/`anyOf` explodes into many, so keep the deepest few. */
function schemaErrors(validate: ValidateFunction): string[] {
  // The deepest paths name the real culprit; a union's shallow errors only say no branch matched.
  const errors = [...(validate.errors ?? [])].sort((a, b) => b.instancePath.length - a.instancePath.length);
  const parts = [...new Set(errors.map((e) => `${e.instancePath || '(root)'} ${e.message ?? 'is invalid'}`))];
  const more = parts.length > 3 ? ` (and ${parts.length - 3} more)` : '';
  return [`schema: ${parts.slice(0, 3).join('; ')}${more}`];
}

/** Every text object (`{type: plain_text|mrkdwn, text}`) longer than Slack's 3000 characters. */
function longTexts(value: unknown, path: string): string[] {
  if (Array.isArray(value)) return value.flatMap((item, i) => longTexts(item, `${path}[${i}]`));
  if (typeof value !== 'object' || value === null) return [];
  const record = value as Record<string, unknown>;
  const found: string[] = [];
  if ((record.type === 'plain_text' || record.type === 'mrkdwn') && typeof record.text === 'string') {
    if (record.text.length > LIMITS.textChars) {
      found.push(
        `${path}: text object of ${record.text.length} characters (Slack allows ${LIMITS.textChars})`,
      );
    }
  }
  for (const [key, child] of Object.entries(record)) found.push(...longTexts(child, `${path}.${key}`));
  return found;
}
