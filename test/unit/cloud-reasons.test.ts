import { describe, expect, it } from 'vitest';
import { MAX_REASON_LENGTH, parseReason, reasonFromBody, sentence } from '../../src/cloud/reasons.ts';

const JSON_TYPE = 'application/json';

describe('reasonFromBody', () => {
  it('reads {"detail": …}', () => {
    expect(reasonFromBody(400, JSON_TYPE, '{"detail":"The VM must be stopped"}')).toBe(
      'The VM must be stopped.',
    );
  });

  it('reads a field list as "field: reason; field: reason" and keeps the fields', () => {
    const body =
      '{"cores":["Ensure this value is less than or equal to 64."],"ram_gb":["A valid integer is required."]}';
    const parsed = parseReason(400, JSON_TYPE, body);
    expect(parsed.reason).toBe(
      'cores: Ensure this value is less than or equal to 64; ram_gb: A valid integer is required.',
    );
    expect(parsed.fields).toEqual({
      cores: ['Ensure this value is less than or equal to 64.'],
      ram_gb: ['A valid integer is required.'],
    });
  });

  it('reads non_field_errors, joining several', () => {
    const body = '{"non_field_errors":["WAN mode cannot switch directly.","Set wan_mode to off first."]}';
    expect(reasonFromBody(400, JSON_TYPE, body)).toBe(
      'WAN mode cannot switch directly; Set wan_mode to off first.',
    );
  });

  it('reads {"message": …} and {"error": …}, plain or nested', () => {
    expect(reasonFromBody(400, JSON_TYPE, '{"message":"Stop the VM first."}')).toBe('Stop the VM first.');
    expect(reasonFromBody(400, JSON_TYPE, '{"error":"quota exceeded"}')).toBe('Quota exceeded.');
    expect(reasonFromBody(400, JSON_TYPE, '{"error":{"code":"E42","message":"Disk cannot shrink"}}')).toBe(
      'Disk cannot shrink.',
    );
  });

  it('reads {"errors": [...]} of strings or objects, and errors given as a field map', () => {
    expect(reasonFromBody(409, JSON_TYPE, '{"errors":["first problem","second problem"]}')).toBe(
      'First problem; second problem.',
    );
    expect(
      reasonFromBody(409, JSON_TYPE, '{"errors":[{"code":"vm_not_stopped","detail":"The VM is running."}]}'),
    ).toBe('The VM is running.');
    const parsed = parseReason(422, JSON_TYPE, '{"errors":{"os_disk_gb":["cannot shrink"]}}');
    expect(parsed.reason).toBe('os_disk_gb: cannot shrink.');
    expect(parsed.fields).toEqual({ os_disk_gb: ['cannot shrink'] });
  });

  it('reads nested arrays and objects without dumping JSON', () => {
    const body = '{"detail":[["outer", {"message":"inner reason"}]]}';
    const reason = reasonFromBody(400, JSON_TYPE, body);
    expect(reason).toBe('Outer; inner reason.');
    expect(reason).not.toMatch(/[{}[\]"]/);
  });

  it('reads a JSON string and a JSON array', () => {
    expect(reasonFromBody(400, JSON_TYPE, '"just a string"')).toBe('Just a string.');
    expect(reasonFromBody(400, JSON_TYPE, '["a", "b"]')).toBe('A; b.');
  });

  it('reads plain text, collapsing whitespace and control characters', () => {
    expect(reasonFromBody(400, 'text/plain', '  Backup\nnot   found\u0007  ')).toBe('Backup not found.');
  });

  it('reads an HTML page by its <title>, else its first <h1>, never the markup', () => {
    const page =
      '<!DOCTYPE html><html><head><title>502 Bad Gateway</title><style>body{}</style></head><body><h1>Oops</h1><p>nginx</p></body></html>';
    expect(reasonFromBody(502, 'text/html', page)).toBe('502 Bad Gateway.');
    const noTitle =
      '<html><body><h1>Service &amp; API <b>down</b></h1><pre>stack trace here</pre></body></html>';
    expect(reasonFromBody(500, 'text/html; charset=utf-8', noTitle)).toBe('Service & API down.');
    const bare = '<html><body><div>x</div></body></html>';
    expect(reasonFromBody(500, 'text/html', bare)).toBe(
      'The service answered HTTP 500 with an HTML page and no readable reason.',
    );
  });

  it('detects HTML without a content type', () => {
    expect(reasonFromBody(502, undefined, '<html><title>Gateway Timeout</title></html>')).toBe(
      'Gateway Timeout.',
    );
  });

  it('says so when the body is empty, or JSON with nothing readable', () => {
    expect(reasonFromBody(409, JSON_TYPE, '')).toBe('The service answered HTTP 409 with no reason.');
    expect(reasonFromBody(409, undefined, '   ')).toBe('The service answered HTTP 409 with no reason.');
    expect(reasonFromBody(400, JSON_TYPE, '{}')).toBe('The service answered HTTP 400 with no reason.');
  });

  it('treats a broken JSON body as text', () => {
    expect(reasonFromBody(400, JSON_TYPE, '{"detail": "unterminated')).toBe('{"detail": "unterminated.');
  });

  it('keeps every reason to one sentence of at most 300 characters ending with a period', () => {
    const long = `{"detail":"${'word '.repeat(200)}"}`;
    const reason = reasonFromBody(400, JSON_TYPE, long);
    expect(reason.length).toBeLessThanOrEqual(MAX_REASON_LENGTH);
    expect(reason.endsWith('.')).toBe(true);
    const text = reasonFromBody(500, 'text/plain', 'x'.repeat(5000));
    expect(text.length).toBeLessThanOrEqual(MAX_REASON_LENGTH);
    expect(text.endsWith('.')).toBe(true);
  });
});

describe('secrets', () => {
  const key = 'sk-live-0123456789abcdef';

  it('scrubs the API key wherever a body echoes it', () => {
    const bodies: [string | undefined, string][] = [
      [JSON_TYPE, `{"detail":"Invalid key ${key} for project"}`],
      [JSON_TYPE, `{"api_key":["${key} is revoked"]}`],
      ['text/plain', `key=${key} refused`],
      ['text/html', `<html><title>Denied ${key}</title></html>`],
    ];
    for (const [type, body] of bodies) {
      const parsed = parseReason(403, type, body, { secrets: [key] });
      expect(parsed.reason).not.toContain(key);
      expect(parsed.reason).toContain('[redacted]');
      expect(JSON.stringify(parsed.fields)).not.toContain(key);
    }
  });

  it('scrubs bearer tokens the service echoes even when they are not ours', () => {
    const reason = reasonFromBody(401, 'text/plain', 'Header was Authorization: Bearer abcdef123456xyz');
    expect(reason).toBe('Header was Authorization: Bearer [redacted].');
    expect(reasonFromBody(401, 'text/plain', 'Invalid token header. Basic authentication is off')).toBe(
      'Invalid token header. Basic authentication is off.',
    );
  });

  it('sentence() scrubs too and strips stray tags', () => {
    expect(sentence(`The key <b>${key}</b> failed`, [key])).toBe('The key [redacted] failed.');
  });
});
