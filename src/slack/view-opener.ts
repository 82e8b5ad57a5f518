import type { ModalView } from '@slack/types';
import { Pool } from 'undici';

/** How hard `views.open` tries: a trigger id lives 3 s, so every retry must fit in what is left of that. */
export interface ViewOpenPolicy {
  /** Attempts in all, the first included. */
  attempts: number;
  /** Pause before a retry after a connection failure. */
  backoffMs: number;
  /** No attempt starts (and no Retry-After is waited for) later than this after the open began. */
  budgetMs: number;
  /** One attempt's limit for the answer's headers and body. */
  timeoutMs: number;
}

/** The policy for modals opened after a slash command's ack. */
export const VIEWS_OPEN_POLICY: ViewOpenPolicy = {
  attempts: 3,
  backoffMs: 200,
  budgetMs: 2500,
  timeoutMs: 2500,
};

/** Slack refused `views.open`, or it could not be reached in time; `error` is Slack's code (never a secret). */
export class ViewOpenError extends Error {
  override readonly name = 'ViewOpenError';
  constructor(readonly error: string) {
    super(`views.open failed: ${error}`);
  }
}

/** Opens a modal for a trigger id. */
export interface ViewOpener {
  open(triggerId: string, view: ModalView): Promise<void>;
  close(): Promise<void>;
}

/** Network errors that happen before the request reached Slack, so a retry cannot open the modal twice. */
const NOT_SENT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'UND_ERR_CONNECT_TIMEOUT']);

/** The start of a successful Web API answer. */
const OK_HEAD = /^\s*\{\s*"ok"\s*:\s*true\b/;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * `views.open` as one JSON POST on a keep-alive pool. The command path opens a modal for every
 * `/cloud resize`; through `@slack/web-api` each call also went through WHATWG fetch, a request queue, a retry
 * wrapper and three redacted debug copies of the whole view (built even when debug is off), which together
 * were the largest CPU cost per command and delayed the acks of the commands behind it.
 */
export function createViewOpener(options: {
  apiUrl: string;
  token: string;
  policy?: ViewOpenPolicy;
  connections?: number;
}): ViewOpener {
  const policy = options.policy ?? VIEWS_OPEN_POLICY;
  const url = new URL('views.open', options.apiUrl.endsWith('/') ? options.apiUrl : `${options.apiUrl}/`);
  const pool = new Pool(url.origin, { connections: options.connections ?? 64, keepAliveTimeout: 30_000 });
  const headers = {
    authorization: `Bearer ${options.token}`,
    // views.open takes JSON (json_input_supported): no form encoding of the whole view.
    'content-type': 'application/json; charset=utf-8',
    accept: 'application/json',
  };

  /** One POST; the Slack error code, or undefined when the modal opened. */
  async function attempt(body: string): Promise<{ error?: string; retryAfterMs?: number }> {
    const response = await pool.request({
      method: 'POST',
      path: url.pathname,
      headers,
      body,
      headersTimeout: policy.timeoutMs,
      bodyTimeout: policy.timeoutMs,
    });
    const text = await response.body.text();
    if (response.statusCode === 429) {
      const seconds = Number(response.headers['retry-after'] ?? 1);
      return { error: 'ratelimited', retryAfterMs: (Number.isFinite(seconds) ? seconds : 1) * 1000 };
    }
    if (response.statusCode !== 200) return { error: `http_${response.statusCode}` };
    // Slack answers `{"ok":true,"view":{…}}`: the echoed view is not needed, so a success is not parsed.
    if (OK_HEAD.test(text.slice(0, 24))) return {};
    let parsed: { ok?: boolean; error?: string };
    try {
      parsed = JSON.parse(text) as { ok?: boolean; error?: string };
    } catch {
      return { error: 'invalid_response' };
    }
    return parsed.ok === true ? {} : { error: parsed.error ?? 'unknown_error' };
  }

  return {
    async open(triggerId, view) {
      const body = JSON.stringify({ trigger_id: triggerId, view });
      const started = performance.now();
      let sentBefore = false;
      for (let n = 1; ; n++) {
        let wait: number;
        let failure: string;
        try {
          const result = await attempt(body);
          if (result.error === undefined) return;
          // An earlier attempt that reached Slack but lost its answer already used the trigger: the modal is open.
          if (result.error === 'exchanged_trigger_id' && sentBefore) return;
          if (result.retryAfterMs === undefined) throw new ViewOpenError(result.error);
          failure = result.error;
          wait = result.retryAfterMs;
        } catch (error) {
          if (error instanceof ViewOpenError) throw error;
          const code = (error as { code?: string }).code ?? 'request_failed';
          if (!NOT_SENT.has(code)) sentBefore = true;
          failure = code;
          wait = policy.backoffMs * n;
        }
        if (n >= policy.attempts || performance.now() - started + wait > policy.budgetMs) {
          throw new ViewOpenError(failure);
        }
        await sleep(wait);
      }
    },
    async close() {
      await pool.close();
    },
  };
}
