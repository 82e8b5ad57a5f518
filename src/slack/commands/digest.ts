import { DIGEST_USAGE, parseDigestCommand } from '../../pricing/schedule-parse.ts';
import { slackDate, typedText } from '../blocks/text.ts';
import { type CommandWord, StoreUnavailableError, TRY_AGAIN, withDeadline } from '../deps.ts';
import type { PricingContext } from './pricing-context.ts';

const SUBSCRIBE_HINT =
  'Subscribe with `/cloud digest daily 09:00 Europe/Paris` (or `weekly mon 09:00`, or `cron "<expr>"`).';

/** `/cloud digest …`: subscribe this channel, unsubscribe, show, or send one now. */
export function digestWord(pricing: PricingContext): CommandWord {
  return {
    word: 'digest',
    usage: DIGEST_USAGE,
    summary: 'this channel’s scheduled pricing digest: subscribe, stop, show, or send one now',
    async handle({ args, slack }) {
      const parsed = parseDigestCommand(args, { minIntervalMs: pricing.minIntervalMs });
      if (parsed.action === 'error') {
        await slack.ack({ response_type: 'ephemeral', text: `:warning: ${typedText(parsed.message)}` });
        return;
      }
      await slack.ack();
      const { channel_id: channel, user_id: user } = slack.command;
      const { scheduler } = pricing;
      try {
        switch (parsed.action) {
          case 'subscribe': {
            const sub = await withDeadline(scheduler.subscribe(channel, parsed.schedule, user));
            const next = sub.next ? ` First one: ${slackDate(sub.next)}.` : '';
            await slack.respond({
              response_type: 'in_channel',
              text: `:calendar: <@${user}> subscribed this channel to the pricing digest, ${parsed.schedule.label}.${next} Stop it with \`/cloud digest off\`.`,
            });
            return;
          }
          case 'off': {
            const removed = await withDeadline(scheduler.unsubscribe(channel));
            await slack.respond(
              removed
                ? { response_type: 'in_channel', text: `<@${user}> stopped this channel’s pricing digest.` }
                : {
                    response_type: 'ephemeral',
                    text: `This channel has no pricing digest. ${SUBSCRIBE_HINT}`,
                  },
            );
            return;
          }
          case 'list': {
            const sub = await withDeadline(scheduler.get(channel));
            await slack.respond({
              response_type: 'ephemeral',
              text: sub
                ? `This channel gets the pricing digest ${sub.label}.${sub.next ? ` Next: ${slackDate(sub.next)}.` : ''}`
                : `This channel has no pricing digest. ${SUBSCRIBE_HINT}`,
            });
            return;
          }
          case 'now': {
            const sent = await withDeadline(scheduler.sendNow(channel, user));
            await slack.respond({
              response_type: 'ephemeral',
              text: sent.queued
                ? `A pricing digest is on its way to this channel. The next one may be asked for from ${slackDate(sent.nextAt)}.`
                : `:hourglass: A pricing digest was asked for in this channel a short while ago; prices do not change by the minute. The next one may be asked for from ${slackDate(sent.nextAt)}.`,
            });
            return;
          }
        }
      } catch (error) {
        pricing.logger.warn({ err: error, channel }, 'digest command failed');
        const text =
          error instanceof StoreUnavailableError ||
          (error as { name?: string }).name === 'MaxRetriesPerRequestError'
            ? TRY_AGAIN
            : ':warning: The digest setting could not be changed. Please try again.';
        await slack.respond({ response_type: 'ephemeral', text }).catch(() => undefined);
      }
    },
  };
}
