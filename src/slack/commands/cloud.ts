import type { App } from '@slack/bolt';
import type { ModalView } from '@slack/types';
import { findProject, type ProjectPolicy } from '../../config/policy.ts';
import { closedLabel, OTHER } from '../../observability/metrics.ts';
import type { VmKnown } from '../../rules/types.ts';
import { jobsBlocks } from '../blocks/jobs.ts';
import { resizeModal, restoreModal } from '../blocks/modals.ts';
import { truncate, typedText } from '../blocks/text.ts';
import {
  afterWaitingAcks,
  type CommandArgs,
  type CommandContext,
  fromStore,
  projectsForChannel,
  type SlackDeps,
  StoreUnavailableError,
  TRY_AGAIN,
  whereProjectLives,
} from '../deps.ts';
import { ticketField } from '../views/ticket-field.ts';
import { helpText } from './help.ts';
import { parseCloudCommand, type ResizeCommand, type RestoreCommand } from './parse.ts';

const ephemeral = (text: string) => ({ response_type: 'ephemeral' as const, text });

/** Resolves the typed project against the channel; a string is the refusal to show. */
function resolveProject(
  deps: SlackDeps,
  channel: string,
  typed: string | undefined,
): ProjectPolicy | undefined | string {
  const here = projectsForChannel(deps.policy, channel);
  if (here.length === 0) {
    const where = deps.policy.projects.flatMap((p) => p.channels.map((c) => `<#${c}>`));
    return `No project is operated from this channel.${where.length > 0 ? ` Projects live in ${[...new Set(where)].join(', ')}.` : ''}`;
  }
  if (typed === undefined) return undefined;
  const project = findProject(deps.policy, typed);
  if (!project)
    return `Unknown project \`${typedText(truncate(typed, 64))}\`. Projects here: ${here.map((p) => `\`${p.name}\``).join(', ')}.`;
  if (!project.channels.includes(channel)) return `Not from this channel: ${whereProjectLives(project)}`;
  return project;
}

async function knownOf(
  deps: SlackDeps,
  project: ProjectPolicy | undefined,
  vmid: number | undefined,
): Promise<VmKnown | undefined> {
  if (!project || vmid === undefined) return undefined;
  return deps.vmFacts.known(project, vmid);
}

const projectChoices = (deps: SlackDeps, channel: string) =>
  projectsForChannel(deps.policy, channel).map((p) => ({
    name: p.name,
    label: p.cluster ? `${p.name} (${p.cluster})` : p.name,
  }));

/** Opens a modal after the ack; storage trouble becomes "try again". */
async function openForm(slack: CommandArgs, deps: SlackDeps, build: () => Promise<ModalView>): Promise<void> {
  try {
    await afterWaitingAcks();
    const view = await build();
    await deps.slack.openView(slack.command.trigger_id, view);
  } catch (error) {
    deps.logger.warn({ err: error }, 'could not open a form');
    const text =
      error instanceof StoreUnavailableError
        ? TRY_AGAIN
        : ':warning: The form could not be opened. Please run the command again.';
    await slack.respond(ephemeral(text)).catch(() => undefined);
  }
}

/** The VM's known facts (the one Redis read of opening a form) and a new draft, sealed into the form. */
async function factsAndDraft(
  slack: CommandArgs,
  deps: SlackDeps,
  kind: 'resize' | 'restore',
  project: ProjectPolicy | undefined,
  vmid: number | undefined,
): Promise<[VmKnown | undefined, string]> {
  const { command } = slack;
  const { sealed } = deps.drafts.create({
    kind,
    user: command.user_id,
    teamId: command.team_id,
    channel: command.channel_id,
    createdAt: deps.now().toISOString(),
  });
  return [await fromStore(knownOf(deps, project, vmid)), sealed];
}

async function resize(slack: CommandArgs, deps: SlackDeps, parsed: ResizeCommand): Promise<void> {
  const { command } = slack;
  const project = resolveProject(deps, command.channel_id, parsed.project);
  if (typeof project === 'string') return void (await slack.ack(ephemeral(project)));
  await slack.ack();
  const fields = deps.policy.resize_fields;
  await openForm(slack, deps, async () => {
    const [vm, sealedDraft] = await factsAndDraft(slack, deps, 'resize', project, parsed.vmid);
    return resizeModal({
      sealedDraft,
      projects: projectChoices(deps, command.channel_id),
      project: project?.name,
      vmid: parsed.vmid,
      vm,
      typed: parsed,
      cpuClassConfigured: fields.cpu_class !== undefined,
      privateNetworkConfigured: fields.private_network !== undefined,
      ticket: ticketField(deps.policy, project, ['resize_up', 'resize_down'], parsed.ticket),
    });
  });
}

async function restore(slack: CommandArgs, deps: SlackDeps, parsed: RestoreCommand): Promise<void> {
  const { command } = slack;
  const project = resolveProject(deps, command.channel_id, parsed.project);
  if (typeof project === 'string') return void (await slack.ack(ephemeral(project)));
  await slack.ack();
  await openForm(slack, deps, async () => {
    const [vm, sealedDraft] = await factsAndDraft(slack, deps, 'restore', project, parsed.vmid);
    return restoreModal({
      sealedDraft,
      projects: projectChoices(deps, command.channel_id),
      project: project?.name,
      vmid: parsed.vmid,
      backupSlug: parsed.backupSlug,
      vm,
      ticket: ticketField(deps.policy, project, ['restore'], parsed.ticket),
    });
  });
}

async function jobs(slack: CommandArgs, deps: SlackDeps): Promise<void> {
  await slack.ack();
  try {
    await afterWaitingAcks();
    const channel = slack.command.channel_id;
    const [requests, open] = await fromStore(
      Promise.all([deps.store.listByChannel(channel, 15), deps.store.openLeases(channel)]),
    );
    await slack.respond({ response_type: 'ephemeral', ...jobsBlocks(requests, { open, now: deps.now() }) });
  } catch (error) {
    deps.logger.warn({ err: error }, 'could not list jobs');
    await slack.respond(ephemeral(TRY_AGAIN)).catch(() => undefined);
  }
}

/**
 * Registers `/cloud`: parses the text, checks the channel's projects, and answers within Slack's 3 s. Modals open
 * through the lean Web API client (SlackApi.openView).
 */
export function register(app: App, deps: SlackDeps): void {
  const words = deps.words ?? [];
  const { cores, ram_gb: ramGb, os_disk_gb: osDiskGb } = deps.policy.limits;
  const limits = { cores, ramGb, osDiskGb };
  // The label's closed set: the words the bot knows, a command that did not parse, and `other` for the rest.
  const labels = new Set(['help', 'jobs', 'resize', 'restore', 'error', ...words.map((w) => w.word), OTHER]);
  // Every series exists from the start, so the count never grows with what is typed.
  for (const word of labels) deps.metrics.commands.inc({ word }, 0);
  app.command('/cloud', async (slack) => {
    const parsed = parseCloudCommand(slack.command.text ?? '', limits);
    deps.metrics.commands.inc({
      word: closedLabel(parsed.word === 'other' ? parsed.name : parsed.word, labels),
    });
    switch (parsed.word) {
      case 'help':
        return void (await slack.ack(ephemeral(helpText(words))));
      case 'error':
        // The parser's words and the typed values in them: nothing of Slack's markup is meant there.
        return void (await slack.ack(ephemeral(`:warning: ${typedText(parsed.message)}`)));
      case 'resize':
        return resize(slack, deps, parsed);
      case 'restore':
        return restore(slack, deps, parsed);
      case 'jobs':
        return jobs(slack, deps);
      case 'other': {
        const word = words.find((w) => w.word === parsed.name);
        if (!word) {
          const known = ['resize', 'restore', 'jobs', ...words.map((w) => w.word), 'help'];
          return void (await slack.ack(
            ephemeral(
              `:warning: Unknown word \`${typedText(truncate(parsed.name, 64))}\`. Try one of: ${known.map((w) => `\`${w}\``).join(', ')}.`,
            ),
          ));
        }
        const ctx: CommandContext = { args: parsed.args, slack, deps };
        return word.handle(ctx);
      }
    }
  });
}
