import type { ViewOutput } from '@slack/bolt';
import type { Violation } from '../../rules/types.ts';
import { FIELDS } from '../blocks/modals.ts';

/** A submitted input: text for text inputs and selects, the chosen values for checkboxes. */
export type FormValue = string | string[] | undefined;

/** Flattens `view.state.values` into block id → value (each of our inputs has one element). */
export function readForm(view: ViewOutput): Record<string, FormValue> {
  const out: Record<string, FormValue> = {};
  for (const [blockId, elements] of Object.entries(view.state.values)) {
    for (const state of Object.values(elements)) {
      if (state.type === 'checkboxes') out[blockId] = (state.selected_options ?? []).map((o) => o.value);
      else if (state.type === 'static_select' || state.type === 'radio_buttons')
        out[blockId] = state.selected_option?.value ?? undefined;
      else if (state.type === 'datepicker') out[blockId] = state.selected_date ?? undefined;
      else out[blockId] = state.value?.trim() || undefined;
    }
  }
  return out;
}

/** The text of a single-valued input, if any. */
export function text(form: Record<string, FormValue>, blockId: string): string | undefined {
  const value = form[blockId];
  return typeof value === 'string' ? value : undefined;
}

/** Whether a checkbox value was ticked. */
export function ticked(form: Record<string, FormValue>, blockId: string, value: string): boolean {
  const chosen = form[blockId];
  return Array.isArray(chosen) && chosen.includes(value);
}

const FIELD_BLOCK: Record<Violation['field'], string> = {
  cores: FIELDS.cores,
  ramGb: FIELDS.ramGb,
  osDiskGb: FIELDS.osDiskGb,
  cpuClass: FIELDS.cpuClass,
  wanMode: FIELDS.wanMode,
  privateNetwork: FIELDS.privateNetwork,
  vmid: FIELDS.vmid,
  typedVmid: FIELDS.typedVmid,
  backupSlug: FIELDS.backupSlug,
  autostart: FIELDS.autostart,
  confirmStopped: FIELDS.confirm,
  project: FIELDS.project,
  lease: FIELDS.leaseFor,
};

/**
 * Field errors for `response_action: errors`: one message per block (joined when a block has several), placed on
 * a block the view really has, else on the first input, so no refusal is ever lost.
 */
export function fieldErrors(
  violations: Violation[],
  blockIds: string[],
  fallback: string,
): Record<string, string> {
  const errors: Record<string, string> = {};
  for (const violation of violations) {
    const wanted = FIELD_BLOCK[violation.field];
    const block = blockIds.includes(wanted) ? wanted : fallback;
    errors[block] = errors[block] ? `${errors[block]} ${violation.message}` : violation.message;
  }
  return errors;
}

/** The input block ids a view has. */
export function inputBlockIds(view: ViewOutput): string[] {
  return view.blocks
    .filter((b) => b.type === 'input')
    .map((b) => (b as { block_id?: string }).block_id ?? '');
}
