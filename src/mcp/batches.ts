import type { IncomingMessage } from 'node:http';
import { DEFAULT_NEGOTIATED_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';

/**
 * The first MCP protocol version without JSON-RPC batching (2025-06-18 removed it; later versions did not bring it
 * back). Versions are dates, so they compare as strings.
 */
export const NO_BATCHES_SINCE = '2025-06-18';

/** A request body as read: its JSON, or why it could not be read. */
export type ReadBody = { ok: true; body: unknown } | { ok: false; status: 400 | 413; message: string };

/** Reads and parses a POST's JSON body, stopping at `maxBytes` (the rest is not read). */
export async function readJsonBody(req: IncomingMessage, maxBytes: number): Promise<ReadBody> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > maxBytes) return { ok: false, status: 413, message: `Request body over ${maxBytes} bytes` };
      chunks.push(chunk);
    }
  } catch {
    // The client went away mid-body: nobody reads the answer, and nothing was done.
    return { ok: false, status: 400, message: 'The request body could not be read' };
  }
  try {
    return { ok: true, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown };
  } catch {
    return { ok: false, status: 400, message: 'Parse error: Invalid JSON' };
  }
}

/**
 * How many calls a body holds: each JSON-RPC request (a method with an id) is one call the server answers and may
 * hold open; notifications and responses hold nothing.
 */
export function callsIn(body: unknown): number {
  const messages = Array.isArray(body) ? body : [body];
  return messages.filter(
    (m) => typeof m === 'object' && m !== null && 'method' in m && 'id' in m && m.id !== undefined,
  ).length;
}

/**
 * Why a batch is refused for repeating a call's id, or undefined. The SDK keys a call's answer and its abort handle
 * by id: a repeated id closed the POST (and gave its places back) at the first answer, while the other calls under
 * that id ran on, held by nothing and never aborted.
 */
export function repeatedIdRefusal(body: unknown): string | undefined {
  if (!Array.isArray(body)) return undefined;
  const seen = new Set<unknown>();
  for (const message of body) {
    if (typeof message !== 'object' || message === null || !('method' in message) || !('id' in message))
      continue;
    const id: unknown = message.id;
    if (id === undefined) continue;
    if (seen.has(id))
      return `A batch repeats id ${JSON.stringify(id).slice(0, 40)}: each call in a batch needs an id of its own`;
    seen.add(id);
  }
  return undefined;
}

/** The protocol version an `initialize` in the batch asks for, if one does. */
function initializeVersion(body: unknown[]): string | undefined {
  for (const message of body) {
    if (typeof message !== 'object' || message === null) continue;
    const { method, params } = message as { method?: unknown; params?: { protocolVersion?: unknown } };
    if (method === 'initialize' && typeof params?.protocolVersion === 'string') return params.protocolVersion;
  }
  return undefined;
}

/**
 * Why a batch is refused under the protocol version the request speaks (its `Mcp-Protocol-Version` header, else the
 * version an `initialize` in it asks for, else the version the SDK assumes without one), or undefined: a single
 * message, or a version that still had batches.
 */
export function batchRefusal(
  body: unknown,
  versionHeader: string | string[] | undefined,
): string | undefined {
  if (!Array.isArray(body)) return undefined;
  const version =
    (Array.isArray(versionHeader) ? versionHeader[0] : versionHeader) ??
    initializeVersion(body) ??
    DEFAULT_NEGOTIATED_PROTOCOL_VERSION;
  if (version < NO_BATCHES_SINCE) return undefined;
  return `JSON-RPC batches are not part of MCP protocol version ${version.slice(0, 32)}: send one call per POST`;
}
