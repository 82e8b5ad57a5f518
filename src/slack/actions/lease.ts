import { findProject } from '../../config/policy.ts';
import { cleanReason, reasonProblem } from '../../rules/inputs.ts';
import { vmLabel } from '../blocks/describe.ts';
import { keepModal, LEASE_ACTIONS, LEASE_FIELDS_BLOCKS, LEASE_VIEWS } from '../blocks/lease.ts';
import { resizeModal } from '../blocks/modals.ts';
import { refusalText } from '../blocks/refusals.ts';
import { type SlackDeps, TRY_AGAIN, withDeadline } from '../deps.ts';
import type { SlackRouter } from '../router.ts';
import { readForm, text } from '../views/form-values.ts';
import { ticketField } from '../views/ticket-field.ts';
import { onButton, requestForView } from './common.ts';

/** States in which a return request is still under way: a second one is not offered meanwhile. */
const UNDER_WAY = ['pending', 'approved', 'frozen', 'queued', 'sending'];

/**
 * A lease's two buttons (docs/policy.md#temporary-changes-leases). "Return to the previous size" opens the usual
 * resize modal, prefilled with the lease's size and checked on submit like any resize, which then goes through the
 * approval policy; "Keep it" asks for a reason and ends the lease. Who may click is the approval policy's answer
 * (the requester or an approver), asked through the lifecycle.
 */
export function register(router: SlackRouter, deps: SlackDeps): void {
  onButton(router, deps, LEASE_ACTIONS.return, async (request, click, button) => {
    const allowed = await deps.requests.leases.mayAct(request, click.user);
    if (!allowed.ok) return refusalText(allowed.refusal, 'lease', request);
    const lease = request.lease;
    const asked = request.params.kind === 'resize' ? request.params.lease : undefined;
    const project = findProject(deps.policy, request.projectUuid);
    if (!lease || !asked || !project) return 'This request has no lease to return.';
    const pending = lease.returnRequestId ? await deps.store.get(lease.returnRequestId) : undefined;
    if (pending && UNDER_WAY.includes(pending.state))
      return `A return is already under way: request \`${pending.id}\`.`;
    const { sealed } = deps.drafts.create({
      kind: 'resize',
      user: click.user,
      teamId: request.teamId,
      channel: request.channel,
      createdAt: deps.now().toISOString(),
      leaseReturn: request.id,
    });
    const vm = await withDeadline(deps.requests.leases.vmNow(request));
    const fields = deps.policy.resize_fields;
    const view = resizeModal({
      sealedDraft: sealed,
      projects: [{ name: project.name, label: project.name }],
      project: project.name,
      vmid: request.vmid,
      vm,
      typed: asked.returnTo,
      cpuClassConfigured: fields.cpu_class !== undefined,
      privateNetworkConfigured: fields.private_network !== undefined,
      returning: { requestId: request.id, to: asked.returnTo, changed: lease.changedSince },
      ticket: ticketField(deps.policy, project, ['resize_down'], undefined),
    });
    await button.client.views
      .open({ trigger_id: button.body.trigger_id, view })
      .catch((error: unknown) => deps.logger.warn({ err: error }, 'could not open the return form'));
    return undefined;
  });

  onButton(router, deps, LEASE_ACTIONS.keep, async (request, click, button) => {
    const allowed = await deps.requests.leases.mayAct(request, click.user);
    if (!allowed.ok) return refusalText(allowed.refusal, 'lease', request);
    await button.client.views
      .open({ trigger_id: button.body.trigger_id, view: keepModal(request.id, vmLabel(request)) })
      .catch((error: unknown) => deps.logger.warn({ err: error }, 'could not open the keep form'));
    return undefined;
  });

  router.view(LEASE_VIEWS.keep, async ({ ack, body, view }) => {
    const errors = (message: string) =>
      ack({ response_action: 'errors', errors: { [LEASE_FIELDS_BLOCKS.keepReason]: message } });
    const typed = text(readForm(view), LEASE_FIELDS_BLOCKS.keepReason) ?? '';
    const reason = cleanReason(typed);
    if (!reason) return void (await errors(reasonProblem(typed) ?? 'Say why the temporary size stays.'));
    const request = await requestForView(deps, view.private_metadata);
    if (request === 'unavailable') return void (await errors(TRY_AGAIN));
    if (!request) return void (await errors('This request is gone.'));
    const decision = await withDeadline(deps.requests.leases.keep(request, body.user.id, reason)).catch(
      () => undefined,
    );
    if (!decision) return void (await errors(TRY_AGAIN));
    if (!decision.ok) return void (await errors(refusalText(decision.refusal, 'lease', request)));
    await ack({ response_action: 'clear' });
  });
}
