import { createHash, generateKeyPairSync, type KeyObject, randomBytes, sign } from 'node:crypto';
import { isoCBOR } from '@simplewebauthn/server/helpers';
import { request as http } from 'undici';

/*
 * A software authenticator and a tab of the verification page over plain HTTP, for the tests that attack the page
 * as a hostile user would: it registers passkeys (attestation "none", ES256) and signs assertions itself, so a test
 * can send what no honest browser would (no user verification, another credential's id, an old proof) without a
 * browser. The bot checks every answer with @simplewebauthn/server, as it does a browser's.
 */

/** Authenticator data flags. */
const UP = 0x01;
const UV = 0x04;
const AT = 0x40;

/** What an answer may change from what an honest authenticator sends. */
export interface Tamper {
  /** Leave out user verification (the UV flag). */
  noUserVerification?: boolean;
  /** The signature counter carried (default: one more than the last). */
  counter?: number;
}

/** One passkey held by the software authenticator. */
export class SoftPasskey {
  readonly id: string;
  private readonly key: KeyObject;
  private readonly publicJwk: { x: string; y: string };
  private counter = 0;

  constructor(
    private readonly origin: string,
    /** The credential id (base64url); random unless a test wants to reuse someone's. */
    id?: string,
  ) {
    this.id = id ?? randomBytes(16).toString('base64url');
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    this.key = privateKey;
    const jwk = publicKey.export({ format: 'jwk' }) as { x: string; y: string };
    this.publicJwk = { x: jwk.x, y: jwk.y };
  }

  private get rpId(): string {
    return new URL(this.origin).hostname;
  }

  private authData(flags: number, counter: number, attested?: Buffer): Buffer {
    const count = Buffer.alloc(4);
    count.writeUInt32BE(counter);
    return Buffer.concat([
      createHash('sha256').update(this.rpId).digest(),
      Buffer.from([flags]),
      count,
      ...(attested ? [attested] : []),
    ]);
  }

  private clientData(type: string, challenge: string): Buffer {
    return Buffer.from(JSON.stringify({ type, challenge, origin: this.origin, crossOrigin: false }));
  }

  /** The public key as COSE (what the bot stores, base64url), for a test that writes a passkey into Redis itself. */
  cosePublicKey(): Buffer {
    return Buffer.from(
      isoCBOR.encode(
        new Map<number, number | Uint8Array>([
          [1, 2],
          [3, -7],
          [-1, 1],
          [-2, Buffer.from(this.publicJwk.x, 'base64url')],
          [-3, Buffer.from(this.publicJwk.y, 'base64url')],
        ]),
      ),
    );
  }

  /** A registration answer to `options` (the page's register-options), attestation "none". */
  registration(options: { challenge: string }, tamper: Tamper = {}) {
    const rawId = Buffer.from(this.id, 'base64url');
    const cose = this.cosePublicKey();
    const idLength = Buffer.alloc(2);
    idLength.writeUInt16BE(rawId.length);
    const attested = Buffer.concat([Buffer.alloc(16), idLength, rawId, Buffer.from(cose)]);
    const flags = UP | AT | (tamper.noUserVerification ? 0 : UV);
    const attestationObject = isoCBOR.encode(
      new Map<string, string | Map<string, string> | Uint8Array>([
        ['fmt', 'none'],
        ['attStmt', new Map<string, string>()],
        ['authData', this.authData(flags, tamper.counter ?? 0, attested)],
      ]),
    );
    return {
      id: this.id,
      rawId: this.id,
      type: 'public-key',
      clientExtensionResults: {},
      response: {
        clientDataJSON: this.clientData('webauthn.create', options.challenge).toString('base64url'),
        attestationObject: Buffer.from(attestationObject).toString('base64url'),
        transports: ['internal'],
      },
    };
  }

  /** An assertion answering `challenge`, signed with this passkey. */
  assertion(challenge: string, tamper: Tamper = {}) {
    this.counter = tamper.counter ?? this.counter + 1;
    const authData = this.authData(UP | (tamper.noUserVerification ? 0 : UV), this.counter);
    const clientData = this.clientData('webauthn.get', challenge);
    const signature = sign(
      'sha256',
      Buffer.concat([authData, createHash('sha256').update(clientData).digest()]),
      this.key,
    );
    return {
      id: this.id,
      rawId: this.id,
      type: 'public-key',
      clientExtensionResults: {},
      response: {
        clientDataJSON: clientData.toString('base64url'),
        authenticatorData: authData.toString('base64url'),
        signature: signature.toString('base64url'),
      },
    };
  }
}

/** What the page answered a POST: its status and the JSON body (an outcome's title, or the options). */
export interface PageAnswer {
  status: number;
  body: Record<string, unknown> & { title?: string; text?: string; challenge?: string };
}

/** One browser tab on a page of the bot (approval or registration): its session cookie and CSRF token. */
export class PageTab {
  private constructor(
    readonly url: string,
    readonly status: number,
    readonly html: string,
    readonly setCookie: string,
    private cookie: string,
    private csrf: string,
    private readonly origin: string,
  ) {}

  /** GETs the page at `url` as a browser would (with `cookie` when it has one for this path). */
  static async open(url: string, cookie?: string): Promise<PageTab> {
    const answer = await http(url, { headers: cookie ? { cookie } : {} });
    const html = await answer.body.text();
    const setCookie = String(answer.headers['set-cookie'] ?? '');
    const csrf = /data-csrf="([^"]+)"/.exec(html)?.[1] ?? /name="csrf" value="([^"]+)"/.exec(html)?.[1] ?? '';
    const pair = setCookie.split(';')[0] || (cookie ?? '');
    return new PageTab(url, answer.statusCode, html, setCookie, pair, csrf, new URL(url).origin);
  }

  /** The `name=value` of the page's session cookie. */
  get sessionCookie(): string {
    return this.cookie;
  }

  /** The page's base path (`data-base`): where its script POSTs. */
  get base(): string {
    return /data-base="([^"]+)"/.exec(this.html)?.[1] ?? '';
  }

  /** POSTs `body` to `<page>/<action>` as the page's script does (cookie, CSRF header, Origin). */
  async post(action: string, body: unknown = {}): Promise<PageAnswer> {
    const answer = await http(`${this.url}/${action}`, {
      method: 'POST',
      headers: {
        cookie: this.cookie,
        'x-csrf-token': this.csrf,
        origin: this.origin,
        'content-type': 'application/json',
      },
      body: JSON.stringify(body),
    });
    const text = await answer.body.text();
    // A proof renews the session, as the page's script follows: the new cookie and the new CSRF token.
    const renewed = String(answer.headers['set-cookie'] ?? '').split(';')[0];
    if (renewed) this.cookie = renewed;
    let parsed: PageAnswer['body'] = {};
    try {
      parsed = JSON.parse(text) as PageAnswer['body'];
    } catch {
      parsed = { title: `not JSON: ${text.slice(0, 80)}` };
    }
    if (typeof parsed.csrf === 'string') this.csrf = parsed.csrf;
    return { status: answer.statusCode, body: parsed };
  }

  /** Proves `passkey` on a registration page (proof-options, proof). */
  async prove(passkey: SoftPasskey, tamper?: Tamper): Promise<PageAnswer> {
    const options = await this.post('proof-options');
    if (options.status !== 200) return options;
    return this.post('proof', { response: passkey.assertion(options.body.challenge ?? '', tamper) });
  }

  /** Registers `passkey` on a registration page (register-options, register). */
  async register(passkey: SoftPasskey, tamper?: Tamper): Promise<PageAnswer> {
    const options = await this.post('register-options');
    if (options.status !== 200) return options;
    return this.post('register', {
      response: passkey.registration({ challenge: options.body.challenge ?? '' }, tamper),
    });
  }

  /** Verifies an approval link with `passkey` (passkey-options, passkey). */
  async approve(passkey: SoftPasskey, tamper?: Tamper): Promise<PageAnswer> {
    const options = await this.post('passkey-options');
    if (options.status !== 200) return options;
    return this.post('passkey', { response: passkey.assertion(options.body.challenge ?? '', tamper) });
  }
}
