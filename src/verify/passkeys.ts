import {
  type AuthenticationResponseJSON,
  generateAuthenticationOptions,
  generateRegistrationOptions,
  type RegistrationResponseJSON,
  verifyAuthenticationResponse,
  verifyRegistrationResponse,
  type WebAuthnCredential,
} from '@simplewebauthn/server';
import { COSEALG } from '@simplewebauthn/server/helpers';
import type { Cluster, Redis } from 'ioredis';
import { AuditAppender, type AuditContext, NO_AUDIT_CONTEXT } from '../requests/audit/append.ts';
import { standaloneEntry } from '../requests/audit/entry.ts';
import type { AuditRequester } from '../requests/model/audit-record.ts';

/*
 * Passkeys (WebAuthn) of Slack users, per workspace: the public key and the signature counter of each credential,
 * in one Redis hash per user. Assertions always ask for user verification (a PIN or a biometric on the device), so
 * a passkey proves the person, not only the device.
 */

/** One stored passkey. */
interface StoredPasskey {
  publicKey: string;
  counter: number;
  transports?: string[];
  createdAt: string;
}

/** Where the page runs: WebAuthn binds passkeys to the host (rpID) and checks the page's origin. */
export interface RelyingParty {
  rpID: string;
  origin: string;
}

/** The relying party of PUBLIC_URL: its hostname and origin. */
export function relyingParty(publicUrl: string): RelyingParty {
  const url = new URL(publicUrl);
  return { rpID: url.hostname, origin: url.origin };
}

/** The passkeys of every Slack user, on Redis under the cluster's prefix. */
export class PasskeyStore {
  private readonly audit: AuditAppender;

  constructor(
    private readonly redis: Redis | Cluster,
    private readonly prefix: string,
    private readonly now: () => Date,
    audit: AuditContext = NO_AUDIT_CONTEXT,
  ) {
    this.audit = new AuditAppender(redis, prefix, audit, now);
  }

  /** Records a passkey act of no request in the audit chain. */
  private async record(actor: string, details: string, requester?: AuditRequester): Promise<void> {
    await this.audit.append([
      standaloneEntry(
        { act: 'passkey', actor, details, ...(requester ? { requester } : {}) },
        this.now().toISOString(),
        this.audit.policyVersion(),
      ),
    ]);
  }

  private key(teamId: string, user: string): string {
    return `${this.prefix}:passkeys:${teamId}:${user}`;
  }

  /** How many passkeys `user` has. */
  count(teamId: string, user: string): Promise<number> {
    return this.redis.hlen(this.key(teamId, user));
  }

  /** The credential ids of `user`'s passkeys. */
  ids(teamId: string, user: string): Promise<string[]> {
    return this.redis.hkeys(this.key(teamId, user));
  }

  /** `user`'s passkey with this credential id; undefined when it is not theirs. */
  async get(teamId: string, user: string, id: string): Promise<WebAuthnCredential | undefined> {
    const json = await this.redis.hget(this.key(teamId, user), id);
    if (json === null) return undefined;
    const stored = JSON.parse(json) as StoredPasskey;
    return {
      id,
      publicKey: Buffer.from(stored.publicKey, 'base64url'),
      counter: stored.counter,
      ...(stored.transports ? { transports: stored.transports } : {}),
    };
  }

  /** Stores a passkey (or its new counter), with an audit entry when it is new. */
  async put(teamId: string, user: string, credential: WebAuthnCredential, detail?: string): Promise<void> {
    const stored: StoredPasskey = {
      publicKey: Buffer.from(credential.publicKey).toString('base64url'),
      counter: credential.counter,
      ...(credential.transports ? { transports: credential.transports } : {}),
      createdAt: this.now().toISOString(),
    };
    await this.redis.hset(this.key(teamId, user), credential.id, JSON.stringify(stored));
    if (detail) await this.record(user, detail);
  }

  /** Updates the signature counter after an assertion, keeping the rest. */
  async touch(teamId: string, user: string, id: string, counter: number): Promise<void> {
    const key = this.key(teamId, user);
    const json = await this.redis.hget(key, id);
    if (json === null) return;
    await this.redis.hset(key, id, JSON.stringify({ ...(JSON.parse(json) as StoredPasskey), counter }));
  }

  /** Removes every passkey of `user` (`cloudops passkeys reset`), audited as `actor`; how many there were. */
  async reset(teamId: string, user: string, actor: string, requester?: AuditRequester): Promise<number> {
    const key = this.key(teamId, user);
    const [[, count] = [null, 0]] = ((await this.redis.multi().hlen(key).del(key).exec()) ?? []) as [
      unknown,
      number,
    ][];
    await this.record(actor, `reset the passkeys of ${user} (${Number(count)} removed)`, requester);
    return Number(count);
  }
}

/**
 * The public-key algorithms offered and accepted: EdDSA, ES256, RS256, what passkeys use. Named here, not
 * left to the library's default, which asks Node whether it can verify ML-DSA: on Node 24 an experimental Web Crypto
 * call that prints a warning to stderr, a stray line beside the bot's JSON log.
 */
const PASSKEY_ALGORITHMS = [COSEALG.EdDSA, COSEALG.ES256, COSEALG.RS256];

/** Options for an assertion with any passkey of this site (discoverable): the server checks whose it is. */
export function assertionOptions(rp: RelyingParty) {
  return generateAuthenticationOptions({ rpID: rp.rpID, userVerification: 'required', timeout: 120_000 });
}

/** Options for registering a discoverable passkey for `user`, never a second one on the same authenticator. */
export function registrationOptions(rp: RelyingParty, teamId: string, user: string, existing: string[]) {
  return generateRegistrationOptions({
    rpName: 'cloudops',
    rpID: rp.rpID,
    userName: user,
    userID: new TextEncoder().encode(`${teamId}:${user}`),
    attestationType: 'none',
    timeout: 120_000,
    excludeCredentials: existing.map((id) => ({ id })),
    supportedAlgorithmIDs: PASSKEY_ALGORITHMS,
    authenticatorSelection: { residentKey: 'required', userVerification: 'required' },
  });
}

/** Checks an assertion against `credential`; its new counter when it holds, else undefined. */
export async function checkAssertion(
  rp: RelyingParty,
  challenge: string,
  response: AuthenticationResponseJSON,
  credential: WebAuthnCredential,
): Promise<number | undefined> {
  try {
    const result = await verifyAuthenticationResponse({
      response,
      expectedChallenge: challenge,
      expectedOrigin: rp.origin,
      expectedRPID: rp.rpID,
      credential,
      requireUserVerification: true,
    });
    return result.verified ? result.authenticationInfo.newCounter : undefined;
  } catch {
    // A malformed or forged response is simply not a verification; the page says so.
    return undefined;
  }
}

/** Checks a registration; the new credential when it holds, else undefined. */
export async function checkRegistration(
  rp: RelyingParty,
  challenge: string,
  response: RegistrationResponseJSON,
): Promise<WebAuthnCredential | undefined> {
  try {
    const result = await verifyRegistrationResponse({
      response,
      expectedChallenge: challenge,
      expectedOrigin: rp.origin,
      expectedRPID: rp.rpID,
      requireUserVerification: true,
      supportedAlgorithmIDs: PASSKEY_ALGORITHMS,
    });
    return result.verified ? result.registrationInfo.credential : undefined;
  } catch {
    return undefined;
  }
}
