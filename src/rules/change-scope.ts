import type { ResizeField, ResizeTarget, WanMode } from './types.ts';

/**
 * What a resize does to one field, against what the bot knows of the VM: raises it, lowers it, both (a WAN switch
 * between ipv4 and ipv6 removes one network and adds another), or unknown (the bot does not know the value now).
 */
export type FieldChange = 'raise' | 'lower' | 'both' | 'unknown';

/** The kinds of resize an asker may be limited to (an agent's `may`). */
export type ResizeScope = 'resize_up' | 'resize_down';

/** A resize classified field by field: the one answer to "is this an increase or a decrease". */
export interface ChangeScope {
  /** Each field the resize changes (a field asked at its current value is left out). */
  fields: Partial<Record<ResizeField, FieldChange>>;
  /** The value before, of each field in `fields` whose value is known. */
  before: Partial<ResizeTarget>;
  /** The value asked, of each field in `fields`. */
  after: Partial<ResizeTarget>;
  /**
   * `resize_up`: it only raises; `resize_down`: it only lowers; `mixed`: it raises and lowers (or a field does both);
   * `unknown`: some field's direction is unknown. Unknown is neither an increase nor a decrease.
   */
  direction: 'resize_up' | 'resize_down' | 'mixed' | 'unknown' | 'none';
}

const ORDER: readonly ResizeField[] = ['cores', 'ramGb', 'osDiskGb', 'cpuClass', 'wanMode', 'privateNetwork'];

/** The networks each WAN mode attaches: a mode with more of them raises, one with fewer lowers. */
const WAN_NETWORKS: Record<WanMode, readonly string[]> = {
  off: [],
  ipv4: ['ipv4'],
  ipv6: ['ipv6'],
  dual: ['ipv4', 'ipv6'],
};

/** Raise, lower or both for one field whose value before is known and differs. */
function changeOf(field: ResizeField, from: string | number, to: string | number): FieldChange {
  if (typeof from === 'number' && typeof to === 'number') return to > from ? 'raise' : 'lower';
  if (field === 'cpuClass') return to === 'regular' ? 'raise' : 'lower';
  if (field === 'privateNetwork') return to === 'on' ? 'raise' : 'lower';
  const had = WAN_NETWORKS[from as WanMode] ?? [];
  const has = WAN_NETWORKS[to as WanMode] ?? [];
  const adds = has.some((n) => !had.includes(n));
  const removes = had.some((n) => !has.includes(n));
  if (adds && removes) return 'both';
  return adds ? 'raise' : 'lower';
}

/** Classifies `target` against `known` (what the bot knows of the VM), field by field. Pure. */
export function classifyChange(known: Partial<ResizeTarget>, target: ResizeTarget): ChangeScope {
  const fields: ChangeScope['fields'] = {};
  const before: Partial<ResizeTarget> = {};
  const after: Partial<ResizeTarget> = {};
  for (const field of ORDER) {
    const to = target[field];
    if (to === undefined) continue;
    const from = known[field];
    if (from === to) continue;
    Object.assign(after, { [field]: to });
    if (from === undefined) {
      fields[field] = 'unknown';
      continue;
    }
    Object.assign(before, { [field]: from });
    fields[field] = changeOf(field, from, to);
  }
  const changes = Object.values(fields);
  const has = (c: FieldChange) => changes.includes(c);
  const direction: ChangeScope['direction'] =
    changes.length === 0
      ? 'none'
      : has('unknown')
        ? 'unknown'
        : has('both') || (has('raise') && has('lower'))
          ? 'mixed'
          : has('raise')
            ? 'resize_up'
            : 'resize_down';
  return { fields, before, after, direction };
}

/** The fields of `scope` that `change` names, in order. */
export function fieldsWith(scope: ChangeScope, ...changes: FieldChange[]): ResizeField[] {
  return ORDER.filter((f) => {
    const c = scope.fields[f];
    return c !== undefined && changes.includes(c);
  });
}

/**
 * The approval kind of a resize (which `approval:` mode and `kind:` rules apply): an increase only when it raises
 * and lowers nothing; anything that lowers, or whose direction is unknown, is checked as a decrease.
 */
export function approvalKind(scope: ChangeScope): ResizeScope {
  return scope.direction === 'resize_up' || scope.direction === 'none' ? 'resize_up' : 'resize_down';
}

const NAMES: Record<ResizeField, string> = {
  cores: 'cores',
  ramGb: 'RAM',
  osDiskGb: 'the OS disk',
  cpuClass: 'the CPU class',
  wanMode: 'the WAN mode',
  privateNetwork: 'the private network',
};

function valueText(field: ResizeField, value: unknown): string {
  return field === 'ramGb' || field === 'osDiskGb' ? `${value} GB` : String(value);
}

/** "cores (4 → 3)", "RAM (? → 64 GB)": a field's change in words. */
export function changeText(scope: ChangeScope, field: ResizeField): string {
  const from = scope.before[field];
  const to = scope.after[field];
  return `${NAMES[field]} (${from === undefined ? '?' : valueText(field, from)} → ${valueText(field, to)})`;
}

/**
 * Why an asker limited to `may` may not ask for this resize, field by field; undefined when every field is within
 * it. A raise needs `resize_up`, a lowering `resize_down`, a field that does both needs both, and a field whose
 * direction is unknown needs both (it may be either). `who` starts the sentence: "Agent deploy-agent".
 */
export function scopeRefusal(scope: ChangeScope, may: readonly string[], who: string): string | undefined {
  const up = may.includes('resize_up');
  const down = may.includes('resize_down');
  if (up && down) return undefined;
  const raised = fieldsWith(scope, 'raise', 'both');
  const lowered = fieldsWith(scope, 'lower', 'both');
  const listed = (fields: ResizeField[]) => fields.map((f) => changeText(scope, f)).join(', ');
  if (!up && raised.length > 0)
    return `${who} may not ask for increases (resize_up), and this change raises ${listed(raised)}.`;
  if (!down && lowered.length > 0)
    return `${who} may not ask for decreases (resize_down), and this change lowers ${listed(lowered)}.`;
  const unknown = fieldsWith(scope, 'unknown');
  if (unknown.length === 0) return undefined;
  const allowed = up
    ? 'only for increases (resize_up)'
    : down
      ? 'only for decreases (resize_down)'
      : 'for no resize';
  return `${who} may ask ${allowed}, and the bot does not know the VM's current ${unknown.map((f) => NAMES[f]).join(', ')}, so whether ${unknown.map((f) => valueText(f, scope.after[f])).join(', ')} raises or lowers ${unknown.length === 1 ? 'it' : 'them'} is unknown.`;
}
