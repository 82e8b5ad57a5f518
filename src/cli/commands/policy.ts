import { policyOf } from '../cloud.ts';
import { type CliIo, write } from '../io.ts';

/** `cloudops policy check [file] [--json]`: validates a policy file; an error names file:line:field. */
export async function policyCheckCommand(
  io: CliIo,
  file: string | undefined,
  json: boolean,
): Promise<number> {
  const path = file ?? io.env.POLICY_FILE;
  const policy = await policyOf(io, path);
  const vms = policy.projects.reduce((n, p) => n + p.vms.length, 0);
  const summary = {
    ok: true,
    file: path,
    projects: policy.projects.map((p) => ({
      name: p.name,
      uuid: p.uuid,
      cluster: p.cluster ?? null,
      channels: p.channels,
      approvers: p.approvers ?? policy.approvers,
      approval: p.approval,
      vms: p.vms.length,
    })),
    currency: policy.currency,
    limits: policy.limits,
    resizeFields: {
      cpuClass: policy.resize_fields.cpu_class?.field ?? null,
      privateNetwork: policy.resize_fields.private_network?.field ?? null,
    },
  };
  if (json) {
    await write(io.stdout, `${JSON.stringify(summary)}\n`);
    return 0;
  }
  const lines = [
    `${path}: OK, ${policy.projects.length} project(s), ${vms} VM fact(s), currency ${policy.currency}.`,
    ...policy.projects.map(
      (p) =>
        `  ${p.name} (${p.uuid})${p.cluster ? ` in ${p.cluster}` : ', no cluster for cost previews'}: channels ${p.channels.join(', ')}; approvers ${(p.approvers ?? policy.approvers).join(', ') || 'none'}`,
    ),
  ];
  if (!policy.resize_fields.cpu_class)
    lines.push('  CPU class is not configured (resize_fields.cpu_class): it is never sent.');
  if (!policy.resize_fields.private_network) {
    lines.push('  Private network is not configured (resize_fields.private_network): it is never sent.');
  }
  await write(io.stdout, `${lines.join('\n')}\n`);
  return 0;
}
