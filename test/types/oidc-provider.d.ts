/**
 * The part of oidc-provider (which ships no types) that test/helpers/oidc-provider.ts uses: the Provider, its
 * interaction helpers and grants.
 */
declare module 'oidc-provider' {
  import type { IncomingMessage, ServerResponse } from 'node:http';

  interface Account {
    accountId: string;
    claims(): Promise<Record<string, unknown>>;
  }

  interface Interaction {
    uid: string;
    params: Record<string, unknown>;
    prompt: { name: string; details: Record<string, unknown> };
  }

  interface InteractionResult {
    login?: { accountId: string; ts?: number; acr?: string; amr?: string[]; remember?: boolean };
    consent?: { grantId: string };
    error?: string;
    error_description?: string;
  }

  interface Configuration {
    clients?: Record<string, unknown>[];
    jwks?: { keys: Record<string, unknown>[] };
    cookies?: { keys?: string[] };
    claims?: Record<string, string[]>;
    conformIdTokenClaims?: boolean;
    acrValues?: string[];
    features?: Record<string, { enabled: boolean }>;
    interactions?: { url(ctx: unknown, interaction: Interaction): string | Promise<string> };
    findAccount?(ctx: unknown, sub: string): Promise<Account | undefined>;
  }

  class Grant {
    constructor(options: { accountId: string; clientId: string });
    addOIDCScope(scope: string): void;
    addOIDCClaims(claims: string[]): void;
    save(): Promise<string>;
  }

  export class Provider {
    constructor(issuer: string, configuration?: Configuration);
    readonly Grant: typeof Grant;
    callback(): (req: IncomingMessage, res: ServerResponse) => void;
    interactionDetails(req: IncomingMessage, res: ServerResponse): Promise<Interaction>;
    interactionFinished(
      req: IncomingMessage,
      res: ServerResponse,
      result: InteractionResult,
      options?: { mergeWithLastSubmission?: boolean },
    ): Promise<void>;
  }
  export default Provider;
}
