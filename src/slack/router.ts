import type {
  AllMiddlewareArgs,
  App,
  SlackAction,
  SlackActionMiddlewareArgs,
  SlackViewAction,
  SlackViewMiddlewareArgs,
} from '@slack/bolt';

/** What a button (or other block action) handler receives. */
export type ActionArgs = SlackActionMiddlewareArgs<SlackAction> & AllMiddlewareArgs;
/** What a view submission handler receives. */
export type ViewArgs = SlackViewMiddlewareArgs<SlackViewAction> & AllMiddlewareArgs;

/** Where the feature modules register their buttons and modals, by exact action id and callback id. */
export interface SlackRouter {
  action(actionId: string, handler: (args: ActionArgs) => Promise<void>): void;
  view(callbackId: string, handler: (args: ViewArgs) => Promise<void>): void;
}

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const exactly = (ids: Iterable<string>) => new RegExp(`^(?:${[...ids].map(escapeRegExp).join('|')})$`);

/**
 * Collects handlers, then gives Bolt one action listener and one view listener that pick the handler from a map.
 * Bolt runs every event through every listener's middleware chain (copying the arguments for each), so one listener
 * per button or modal made each request pay for all of them, before and after its ack.
 */
export function createRouter(): SlackRouter & { attach(app: App): void } {
  const actions = new Map<string, (args: ActionArgs) => Promise<void>>();
  const views = new Map<string, (args: ViewArgs) => Promise<void>>();
  const add = <T>(map: Map<string, T>, id: string, handler: T) => {
    if (map.has(id)) throw new Error(`${id} is registered twice`);
    map.set(id, handler);
  };
  return {
    action: (actionId, handler) => add(actions, actionId, handler),
    view: (callbackId, handler) => add(views, callbackId, handler),
    attach(app) {
      // Only ids registered here match, so anything else stays unhandled exactly as with one listener each.
      if (actions.size > 0) {
        app.action(exactly(actions.keys()), async (args) => {
          const id = 'action_id' in args.action ? args.action.action_id : undefined;
          const handler = id === undefined ? undefined : actions.get(id);
          if (handler) await handler(args);
        });
      }
      if (views.size > 0) {
        app.view(exactly(views.keys()), async (args) => {
          const handler = views.get(args.view.callback_id);
          if (handler) await handler(args);
        });
      }
    },
  };
}
