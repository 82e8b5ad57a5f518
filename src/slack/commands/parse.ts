import { INPUT_MAX_LENGTH, MAX_VMID, readTargetWords } from '../../rules/inputs.ts';
import { type LeaseTerm, parseLeaseTerm } from '../../rules/lease.ts';
import {
  CPU_CLASSES,
  type CpuClass,
  ON_OFF,
  type OnOff,
  type ResizeTarget,
  type SizeLimits,
  WAN_MODES,
  type WanMode,
} from '../../rules/types.ts';

/** Splits command text into words; double or single quotes keep spaces inside one word. */
export function tokenize(text: string): string[] | { error: string } {
  const words: string[] = [];
  const normalised = text.replace(/[\u201c\u201d]/g, '"').replace(/[\u2018\u2019]/g, "'");
  const pattern = /"([^"]*)"|'([^']*)'|(\S+)/g;
  for (const match of normalised.matchAll(pattern)) {
    words.push(match[1] ?? match[2] ?? match[3] ?? '');
  }
  const quotes = (normalised.match(/"/g) ?? []).length;
  if (quotes % 2 === 1) return { error: 'a quote is not closed' };
  return words;
}

/** What `/cloud resize …` typed, before anything is checked against the policy or the rules. */
export interface ResizeCommand extends ResizeTarget {
  word: 'resize';
  project?: string;
  vmid?: number;
  /** `for=48h`, `for=7d`, `for=2026-12-01`: a temporary increase. */
  lease?: LeaseTerm;
  /** `ticket=OPS-42`: the change ticket, filled into the form's Ticket field. */
  ticket?: string;
}

export interface RestoreCommand {
  word: 'restore';
  project?: string;
  vmid?: number;
  backupSlug?: string;
  ticket?: string;
}

export type ParsedCommand =
  | { word: 'help' }
  | { word: 'jobs' }
  | ResizeCommand
  | RestoreCommand
  | { word: 'other'; name: string; args: string[] }
  | { word: 'error'; message: string };

/** Usage lines for the words this module parses. */
export const USAGE = {
  resize:
    '`/cloud resize [<project> <vmid>] [cores=N] [ram=N] [disk=N] [cpu=regular|light] [wan=off|ipv4|ipv6|dual] [private=off|on] [for=48h|7d|2026-12-01] [ticket=KEY]`',
  restore: '`/cloud restore [<project> <vmid> [<backup_slug>]] [ticket=KEY]`',
  jobs: '`/cloud jobs`',
  help: '`/cloud help`',
} as const;

const fail = (message: string): ParsedCommand => ({ word: 'error', message });

/** Shows a typed value in a refusal without letting a huge paste through. */
const shown = (value: string) => `\`${value.length > 24 ? `${value.slice(0, 24)}…` : value}\``;

/** A whole number from 1 to `limit` (the policy's), or why not. */
function wholeNumber(key: string, value: string, limit: number): number | string {
  if (!/^\d+$/.test(value)) return `\`${key}\` takes a whole number, not ${shown(value)}`;
  const n = Number(value);
  if (n <= 0) return `\`${key}\` must be a whole number above 0`;
  // Compared as numbers: any run of digits too long for a safe integer is far above every limit.
  if (n > limit) return `\`${key}\` must be at most ${limit} (the policy's limit), not ${shown(value)}`;
  return n;
}

/**
 * Parses the text after `/cloud`. Never throws; a mistake comes back as `{ word: 'error', message }`. Sizes above
 * the policy's `limits` and VM ids longer than the modal's input are refused here, with the limit, instead of
 * being copied into the modal.
 */
export function parseCloudCommand(text: string, limits: SizeLimits): ParsedCommand {
  const tokens = tokenize(text.trim());
  if (!Array.isArray(tokens)) return fail(`${tokens.error}. `);
  const [first, ...args] = tokens;
  const word = (first ?? 'help').toLowerCase();
  switch (word) {
    case 'help':
    case '':
      return { word: 'help' };
    case 'jobs':
      return args.length === 0 ? { word: 'jobs' } : fail(`\`jobs\` takes no arguments. Usage: ${USAGE.jobs}`);
    case 'resize':
      return parseResize(args, limits);
    case 'restore':
      return parseRestore(args);
    default:
      return { word: 'other', name: word, args };
  }
}

function parsePositional(
  args: string[],
  usage: string,
): { project?: string; vmid?: number; rest: string[] } | string {
  const positional = args.filter((a) => !a.includes('='));
  const [project, vmidText, ...rest] = positional;
  if (project === undefined) return { rest: [] };
  if (vmidText === undefined) return `give the VM id after the project. Usage: ${usage}`;
  const vmid = Number(vmidText);
  if (!/^\d+$/.test(vmidText) || vmid <= 0)
    return `the VM id must be a whole number above 0, not ${shown(vmidText)}`;
  if (vmid > MAX_VMID) return `the VM id has at most ${INPUT_MAX_LENGTH.vmid} digits, not ${shown(vmidText)}`;
  return { project, vmid, rest };
}

/** Takes the `for=` word (a lease) out of the resize words: the term, or why it was refused. */
function takeLease(args: string[]): { lease?: LeaseTerm; rest: string[] } | string {
  const isFor = (a: string) => a.toLowerCase().startsWith('for=');
  const words = args.filter(isFor);
  const rest = args.filter((a) => !isFor(a));
  const [word, twice] = words;
  if (twice !== undefined) return '`for` is given twice';
  if (word === undefined) return { rest };
  const term = parseLeaseTerm(word.slice('for='.length));
  if ('error' in term) return `\`for\`: ${term.error}, not ${shown(word.slice('for='.length))}`;
  return { lease: term, rest };
}

/**
 * Takes the `ticket=` word out: the key as typed, or why it was refused. Only its characters are checked here (a
 * Jira key or a ServiceNow number); the ticket system and its rules judge it when the form is submitted.
 */
function takeTicket(args: string[]): { ticket?: string; rest: string[] } | string {
  const isTicket = (a: string) => a.toLowerCase().startsWith('ticket=');
  const words = args.filter(isTicket);
  const rest = args.filter((a) => !isTicket(a));
  const [word, twice] = words;
  if (twice !== undefined) return '`ticket` is given twice';
  if (word === undefined) return { rest };
  const key = word.slice('ticket='.length);
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(key))
    return `\`ticket\` is a Jira key such as OPS-123 or a ServiceNow number such as CHG0030001, not ${shown(key)}`;
  return { ticket: key, rest };
}

function parseResize(all: string[], limits: SizeLimits): ParsedCommand {
  const ticketed = takeTicket(all);
  if (typeof ticketed === 'string') return fail(ticketed);
  const words = ticketed.rest;
  const taken = takeLease(words);
  if (typeof taken === 'string') return fail(taken);
  const args = taken.rest;
  const positional = parsePositional(args, USAGE.resize);
  if (typeof positional === 'string') return fail(positional);
  if (positional.rest.length > 0) {
    return fail(
      `unexpected \`${positional.rest[0]}\`: options are written key=value. Usage: ${USAGE.resize}`,
    );
  }
  const read = readTargetWords<string>(
    args.filter((a) => a.includes('=')),
    (field, raw, key) => typedValue(field, key, raw.toLowerCase(), limits),
  );
  if ('problem' in read) {
    const { problem } = read;
    switch (problem.code) {
      case 'twice':
        return fail(`\`${problem.key}\` is given twice`);
      case 'bad_value':
        return fail(problem.error);
      default:
        return fail(
          `unknown option \`${problem.code === 'unknown_key' ? problem.key : problem.word}\`. Usage: ${USAGE.resize}`,
        );
    }
  }
  const command: ResizeCommand = {
    word: 'resize',
    project: positional.project,
    vmid: positional.vmid,
    ...read.target,
  };
  if (taken.lease) command.lease = taken.lease;
  if (ticketed.ticket) command.ticket = ticketed.ticket;
  return command;
}

/** One typed value (already lower case), or why not, in the command line's words. */
function typedValue(
  field: keyof ResizeTarget,
  key: string,
  value: string,
  limits: SizeLimits,
): ResizeTarget[keyof ResizeTarget] | { error: string } {
  switch (field) {
    case 'cores':
    case 'ramGb':
    case 'osDiskGb': {
      const n = wholeNumber(key, value, limits[field]);
      return typeof n === 'number' ? n : { error: n };
    }
    case 'cpuClass':
      return CPU_CLASSES.includes(value as CpuClass)
        ? (value as CpuClass)
        : { error: `\`cpu\` is regular or light, not \`${value}\`` };
    case 'wanMode':
      return WAN_MODES.includes(value as WanMode)
        ? (value as WanMode)
        : { error: `\`wan\` is off, ipv4, ipv6 or dual, not \`${value}\`` };
    case 'privateNetwork':
      return ON_OFF.includes(value as OnOff)
        ? (value as OnOff)
        : { error: `\`private\` is off or on, not \`${value}\`` };
  }
}

function parseRestore(all: string[]): ParsedCommand {
  const ticketed = takeTicket(all);
  if (typeof ticketed === 'string') return fail(ticketed);
  const args = ticketed.rest;
  if (args.some((a) => a.includes('=')))
    return fail(`restore takes no key=value options but ticket=. Usage: ${USAGE.restore}`);
  const positional = parsePositional(args, USAGE.restore);
  if (typeof positional === 'string') return fail(positional);
  if (positional.rest.length > 1) return fail(`too many words. Usage: ${USAGE.restore}`);
  const backupSlug = positional.rest[0];
  if (
    backupSlug !== undefined &&
    (!/^[A-Za-z0-9._-]{1,128}$/.test(backupSlug) || /^\.{1,2}$/.test(backupSlug))
  ) {
    return fail(`a backup slug has only letters, digits, ".", "_" and "-", not \`${backupSlug}\``);
  }
  return {
    word: 'restore',
    project: positional.project,
    vmid: positional.vmid,
    backupSlug,
    ...(ticketed.ticket ? { ticket: ticketed.ticket } : {}),
  };
}
