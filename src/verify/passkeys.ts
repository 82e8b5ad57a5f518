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
import type { SealKeys } from '../config/seal-keys.ts';
import { AuditAppender, type AuditContext } from '../requests/audit/append.ts';
import { standaloneEntry } from '../requests/audit/entry.ts';
import type { AuditRequester } from '../requests/model/audit-record.ts';
import { requestKeys } from '../requests/store/keys.ts';
import { LINK_STATE_LUA, type LinkUse, registrationLinksKey } from './links.ts';
import { VerifySeals } from './seals.ts';

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
  /** SEAL_KEY's seal of the person, the credential id and the public key (src/verify/seals.ts). */
  seal?: string;
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

/** What adding a passkey answered: 'ok', the link's state, or why the page's proof or the id cannot stand. */
export type AddOutcome = LinkUse | 'proof_stale' | 'taken';

/** A passkey to add, with what the page proved and the link it is registered through. */
export interface NewPasskey {
  teamId: string;
  user: string;
  credential: WebAuthnCredential;
  /** The registration link's Redis key: used up in the same script. */
  link: string;
  /**
   * What the registration rests on: `first` (trusted on first use: only while the person has none), `passkey` (the
   * credential id proved on the page: only while it is still theirs), or `sso` (a login, which no reset undoes).
   */
  proof: { kind: 'first' } | { kind: 'passkey'; id: string } | { kind: 'sso' };
  /** The audit entry's detail. */
  detail: string;
}

// KEYS[1] the person's passkeys, KEYS[2] the owners of credential ids, KEYS[3] the link, KEYS[4] unused, KEYS[5] the
// person's open registration links (the used one gives its place back).
// ARGV[1] credential id, ARGV[2] the stored entry, ARGV[3] owner (team:user), ARGV[4] now (ms), ARGV[5] proof kind,
// ARGV[6] the proved credential id, ARGV[7] audit detail, ARGV[8] the person.
const ADD = `${LINK_STATE_LUA}
local state = link_state(KEYS[3], ARGV[4])
if state ~= 'ok' then return state end
if ARGV[5] == 'first' and redis.call('HLEN', KEYS[1]) > 0 then return 'proof_stale' end
if ARGV[5] == 'passkey' and redis.call('HEXISTS', KEYS[1], ARGV[6]) == 0 then return 'proof_stale' end
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 or redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  return 'taken'
end
redis.call('HSET', KEYS[3], 'used', '1')
redis.call('ZREM', KEYS[5], KEYS[3])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
return 'ok'`;

// KEYS[1] the person's passkeys; ARGV[1] credential id, ARGV[2] the new counter. Only while the passkey exists, and
// only forward: two answers checked against the same stored counter cannot both move it (a cloned authenticator).
const TOUCH = `
local json = redis.call('HGET', KEYS[1], ARGV[1])
if not json then return 'gone' end
local stored = tonumber(string.match(json, '"counter":(%d+)'))
local counter = tonumber(ARGV[2])
if (counter > 0 or stored > 0) and counter <= stored then return 'replayed' end
redis.call('HSET', KEYS[1], ARGV[1], (string.gsub(json, '"counter":%d+', '"counter":' .. ARGV[2], 1)))
return 'ok'`;

// KEYS[1] the person's passkeys, KEYS[2] the owners, KEYS[3] their open registration links, KEYS[4] unused.
// ARGV[1] owner (team:user), ARGV[2] the person, ARGV[3] who reset. The registration links are ended in place (keys
// under the same prefix: one slot on a cluster), so a page proved with a removed passkey, or by a login before the
// reset, registers nothing; approval links rest on no passkey (their proof is made when they are used).
const RESET = `
local ids = redis.call('HKEYS', KEYS[1])
for _, id in ipairs(ids) do
  if redis.call('HGET', KEYS[2], id) == ARGV[1] then redis.call('HDEL', KEYS[2], id) end
end
for _, link in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
  if redis.call('EXISTS', link) == 1 then redis.call('HSET', link, 'used', 'reset') end
end
redis.call('DEL', KEYS[1], KEYS[3])
return #ids`;

/** The passkeys of every Slack user, on Redis under the cluster's prefix. */
export class PasskeyStore {
  private readonly audit: string;
  /** Credential id → the one person (team:user) who holds it: two people never hold one id. */
  private readonly owners: string;

  private readonly seals: VerifySeals;
  /** The audit chain: a script cannot chain an entry (its hash needs the whole entry), so it follows the script. */
  private readonly chain: AuditAppender;

  constructor(
    private readonly redis: Redis | Cluster,
    private readonly prefix: string,
    private readonly now: () => Date,
    /** SEAL_KEY's keys: passkeys are sealed when added and checked when read (the CLI's reset needs none). */
    keys?: SealKeys,
    /** How the audit entries are sealed; by default with `keys`. */
    audit: AuditContext = { ...(keys ? { sealer: keys } : {}), policyVersion: () => null },
  ) {
    this.audit = requestKeys(prefix).audit;
    this.owners = `${prefix}:passkey-owners`;
    this.seals = new VerifySeals(keys, redis, prefix);
    this.chain = new AuditAppender(redis, prefix, audit, now);
  }

  /** Records a passkey act of no request in the audit chain. */
  private async record(actor: string, details: string, requester?: AuditRequester): Promise<void> {
    await this.chain.append([
      standaloneEntry(
        { act: 'passkey', actor, details, ...(requester ? { requester } : {}) },
        this.now().toISOString(),
        this.chain.policyVersion(),
      ),
    ]);
  }

  /** What a passkey's seal covers: whose it is, its credential id and its public key. */
  private sealed(teamId: string, user: string, id: string, publicKey: string): string[] {
    return ['passkey', teamId, user, id, publicKey];
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

  /** `user`'s passkey with this credential id; undefined when it is not theirs, or its seal does not check. */
  async get(teamId: string, user: string, id: string): Promise<WebAuthnCredential | undefined> {
    const json = await this.redis.hget(this.key(teamId, user), id);
    if (json === null) return undefined;
    const stored = JSON.parse(json) as StoredPasskey;
    const parts = this.sealed(teamId, user, id, stored.publicKey);
    if (!(await this.seals.holds(parts, stored.seal, `passkey ${id} of ${user}`))) return undefined;
    return {
      id,
      publicKey: Buffer.from(stored.publicKey, 'base64url'),
      counter: stored.counter,
      ...(stored.transports ? { transports: stored.transports } : {}),
    };
  }

  /**
   * Adds a registered passkey, in one script with everything it rests on: the link is still open (and is used up),
   * the page's proof still holds (a first passkey only while there is none; a proved one only while it is still
   * theirs), and nobody holds the credential id (another person, or this one: never overwritten). Audited.
   */
  async add(passkey: NewPasskey): Promise<AddOutcome> {
    const { teamId, user, credential, proof } = passkey;
    const publicKey = Buffer.from(credential.publicKey).toString('base64url');
    const seal = this.seals.seal(this.sealed(teamId, user, credential.id, publicKey));
    const stored: StoredPasskey = {
      publicKey,
      counter: credential.counter,
      ...(credential.transports ? { transports: credential.transports } : {}),
      createdAt: this.now().toISOString(),
      ...(seal ? { seal } : {}),
    };
    const result = await this.redis.eval(
      ADD,
      5,
      this.key(teamId, user),
      this.owners,
      passkey.link,
      this.audit,
      registrationLinksKey(this.prefix, teamId, user),
      credential.id,
      JSON.stringify(stored),
      `${teamId}:${user}`,
      String(this.now().getTime()),
      proof.kind,
      proof.kind === 'passkey' ? proof.id : '',
      passkey.detail,
      user,
    );
    if (result === 'ok') await this.record(user, passkey.detail);
    return result as AddOutcome;
  }

  /**
   * Moves the signature counter after an assertion, only while the passkey exists and only forward: 'ok', 'gone' (a
   * reset removed it meanwhile) or 'replayed' (another answer moved it first).
   */
  async touch(
    teamId: string,
    user: string,
    id: string,
    counter: number,
  ): Promise<'ok' | 'gone' | 'replayed'> {
    const result = await this.redis.eval(TOUCH, 1, this.key(teamId, user), id, String(counter));
    return result as 'ok' | 'gone' | 'replayed';
  }

  /**
   * Removes every passkey of `user` (`cloudops passkeys reset`) and ends their open registration links, audited as
   * `actor`; how many passkeys there were.
   */
  async reset(teamId: string, user: string, actor: string, requester?: AuditRequester): Promise<number> {
    const removed = await this.redis.eval(
      RESET,
      4,
      this.key(teamId, user),
      this.owners,
      registrationLinksKey(this.prefix, teamId, user),
      this.audit,
      `${teamId}:${user}`,
      user,
      actor,
    );
    await this.record(actor, `reset the passkeys of ${user} (${Number(removed)} removed)`, requester);
    return Number(removed);
  }

  /**
   * The workspaces where `user` has passkeys or open registration links, found by their keys: for a policy that names
   * no workspace (the bot then keeps them under the team id Slack sends).
   */
  async teamsOf(user: string): Promise<string[]> {
    const teams = new Set<string>();
    const nodes = 'nodes' in this.redis ? this.redis.nodes('master') : [this.redis];
    for (const base of [`${this.prefix}:passkeys:`, `${this.prefix}:passkey-links:`]) {
      const match = `${globEscape(base)}*:${globEscape(user)}`;
      for (const node of nodes) {
        for await (const keys of node.scanStream({ match, count: 500 }) as AsyncIterable<string[]>) {
          for (const key of keys) {
            const team = key.slice(base.length, key.length - user.length - 1);
            if (/^[A-Za-z0-9_-]+$/.test(team)) teams.add(team);
          }
        }
      }
    }
    return [...teams].sort();
  }
}

/** `text` matched literally in a SCAN pattern. */
const globEscape = (text: string) => text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);

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
