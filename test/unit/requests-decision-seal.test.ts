import { describe, expect, it } from 'vitest';
import { sealKeysFrom } from '../../src/config/seal-keys.ts';
import {
  approvalDecision,
  breakGlassDecision,
  decisionHolds,
  requestFacts,
  sealDecision,
} from '../../src/requests/approval/decision-seal.ts';
import { canonicalJson } from '../../src/requests/model/canonical-json.ts';
import type { CloudRequest } from '../../src/requests/model/types.ts';
import { resizeRequest } from '../fixtures/requests.ts';
import { TEST_SEAL_KEY, TEST_SEAL_KEY_PREVIOUS } from '../helpers/seal.ts';

const keys = sealKeysFrom(TEST_SEAL_KEY);

function request(): CloudRequest {
  return {
    ...resizeRequest({ target: { cores: 6 } }),
    id: 'R7K2M9QX',
    state: 'queued',
    version: 2,
    revision: 2,
    createdAt: '2026-12-07T05:00:00.000Z',
    updatedAt: '2026-12-07T05:01:00.000Z',
    nextStep: 0,
    outcomes: [],
  };
}

const approval = {
  user: 'U0LEAD',
  at: '2026-12-07T05:01:00.000Z',
  verified: { method: 'passkey' as const, subject: 'cred-1' },
  revision: 1,
};

describe('a decision seal', () => {
  it('sorts keys, so the same structure gives the same text whatever order its fields were written in', () => {
    expect(canonicalJson({ b: 1, a: { d: [2, { f: 1, e: 0 }], c: 'x' }, u: undefined })).toBe(
      '{"a":{"c":"x","d":[2,{"e":0,"f":1}]},"b":1}',
    );
    const reverse = (value: unknown): unknown =>
      Array.isArray(value)
        ? value.map(reverse)
        : value && typeof value === 'object'
          ? Object.fromEntries(
              Object.entries(value)
                .reverse()
                .map(([k, v]) => [k, reverse(v)]),
            )
          : value;
    const reordered = reverse(request()) as CloudRequest;
    expect(JSON.stringify(reordered)).not.toBe(JSON.stringify(request()));
    expect(requestFacts(reordered)).toBe(requestFacts(request()));
  });

  it('covers every field the contract names: a change to any one breaks it', () => {
    const seal = sealDecision(keys, request(), approvalDecision(approval));
    expect(seal).toMatch(new RegExp(`^${keys.kid}\\.[A-Za-z0-9_-]{43}$`));
    expect(decisionHolds(keys, requestFacts(request()), approvalDecision(approval), seal)).toBe(true);

    const onRequest: [string, (r: CloudRequest) => void][] = [
      [
        'id',
        (r) => {
          r.id = 'R7K2M9QY';
        },
      ],
      [
        'team',
        (r) => {
          r.teamId = 'T0OTHER';
        },
      ],
      [
        'project uuid',
        (r) => {
          r.projectUuid = 'a3c1e2d4-5b6f-4a7b-8c9d-0e1f2a3b4c5d';
        },
      ],
      [
        'project name',
        (r) => {
          r.projectName = 'shop-staging';
        },
      ],
      [
        'VM',
        (r) => {
          r.vmid = 102;
        },
      ],
      [
        'a field after',
        (r) => {
          if (r.params.kind === 'resize') r.params.target = { cores: 8 };
        },
      ],
      [
        'the steps',
        (r) => {
          if (r.params.kind === 'resize') r.params.steps = [{ cores: 8 }];
        },
      ],
      [
        'a field before',
        (r) => {
          if (r.params.kind === 'resize') r.params.before.cores = 3;
        },
      ],
      [
        'the requester',
        (r) => {
          r.requester = 'U0OTHER';
        },
      ],
      [
        'the agent',
        (r) => {
          r.agent = { name: 'ci-bot' };
        },
      ],
      [
        'the ticket',
        (r) => {
          Object.assign(r, { ticket: 'OPS-1' });
        },
      ],
      [
        'the scheduled time',
        (r) => {
          r.runAt = '2026-12-08T00:00:00.000Z';
        },
      ],
    ];
    for (const [what, edit] of onRequest) {
      const changed = request();
      edit(changed);
      expect(decisionHolds(keys, requestFacts(changed), approvalDecision(approval), seal), what).toBe(false);
    }
    const onDecision: [string, Partial<typeof approval>][] = [
      ['the approver', { user: 'U0LEAD2' }],
      ['the time', { at: '2026-12-07T06:01:00.000Z' }],
      ['the revision', { revision: 2 }],
      ['the method', { verified: { method: 'sso', subject: 'cred-1' } as never }],
      ['the credential', { verified: { method: 'passkey', subject: 'cred-2' } }],
      ['no verification', { verified: undefined }],
    ];
    for (const [what, change] of onDecision) {
      const decision = approvalDecision({ ...approval, ...change });
      expect(decisionHolds(keys, requestFacts(request()), decision, seal), what).toBe(false);
    }
    const kind = { ...approvalDecision(approval), kind: 'break_glass' as const };
    expect(decisionHolds(keys, requestFacts(request()), kind, seal)).toBe(false);
  });

  it('names its key: the previous key checks what it sealed, never seals; another key id or an empty seal fails', () => {
    const old = sealKeysFrom(TEST_SEAL_KEY_PREVIOUS);
    const seal = sealDecision(old, request(), approvalDecision(approval));
    const facts = requestFacts(request());
    expect(decisionHolds(keys, facts, approvalDecision(approval), seal)).toBe(false);
    const rotating = sealKeysFrom(TEST_SEAL_KEY, TEST_SEAL_KEY_PREVIOUS);
    expect(decisionHolds(rotating, facts, approvalDecision(approval), seal)).toBe(true);
    expect(sealDecision(rotating, request(), approvalDecision(approval))).toMatch(
      new RegExp(`^${keys.kid}\\.`),
    );
    expect(decisionHolds(rotating, facts, approvalDecision(approval), `${keys.kid}${seal.slice(12)}`)).toBe(
      false,
    );
    expect(decisionHolds(rotating, facts, approvalDecision(approval), '')).toBe(false);
    expect(decisionHolds(rotating, facts, approvalDecision(approval), undefined)).toBe(false);
  });

  it("seals a break glass with its verification: the method and subject are the verification's, a click's are slack and empty", () => {
    const at = '2026-12-07T05:02:00.000Z';
    const verified = { method: 'passkey' as const, subject: 'cred-9' };
    expect(breakGlassDecision('U0ADMIN', at, 1)).toEqual({
      kind: 'break_glass',
      by: 'U0ADMIN',
      method: 'slack',
      subject: '',
      at,
      revision: 1,
    });
    expect(breakGlassDecision('U0ADMIN', at, 1, verified)).toMatchObject({
      kind: 'break_glass',
      method: 'passkey',
      subject: 'cred-9',
    });
    const facts = requestFacts(request());
    const sealed = sealDecision(keys, request(), breakGlassDecision('U0ADMIN', at, 1, verified));
    expect(decisionHolds(keys, facts, breakGlassDecision('U0ADMIN', at, 1, verified), sealed)).toBe(true);
    const others: [string, ReturnType<typeof breakGlassDecision>][] = [
      ['no verification', breakGlassDecision('U0ADMIN', at, 1)],
      ['another method', breakGlassDecision('U0ADMIN', at, 1, { method: 'sso', subject: 'cred-9' })],
      ['another credential', breakGlassDecision('U0ADMIN', at, 1, { method: 'passkey', subject: 'cred-8' })],
      ['another breaker', breakGlassDecision('U0LEAD', at, 1, verified)],
      ['an approval', { ...breakGlassDecision('U0ADMIN', at, 1, verified), kind: 'approval' }],
    ];
    for (const [what, decision] of others)
      expect(decisionHolds(keys, facts, decision, sealed), what).toBe(false);
    // A click's seal does not hold once a verification is added to it (what a Redis writer would do).
    const click = sealDecision(keys, request(), breakGlassDecision('U0ADMIN', at, 1));
    expect(decisionHolds(keys, facts, breakGlassDecision('U0ADMIN', at, 1), click)).toBe(true);
    expect(decisionHolds(keys, facts, breakGlassDecision('U0ADMIN', at, 1, verified), click)).toBe(false);
  });
});
