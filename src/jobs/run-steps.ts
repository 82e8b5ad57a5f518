import type { CloudRequest } from '../requests/types.ts';
import type { ResizeTarget } from '../rules/types.ts';

/** The calls a request makes: its resize steps, or one restore (no body). */
export function stepsOf(request: CloudRequest): (ResizeTarget | undefined)[] {
  return request.params.kind === 'resize' ? request.params.steps : [undefined];
}

/** Audit details stay one short line. */
export function truncateDetail(text: string): string {
  return text.length > 200 ? `${text.slice(0, 199)}…` : text;
}
