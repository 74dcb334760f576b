import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { BackendUnavailableError, QueryError } from '../../src/errors.js';
import { errorObject, ServiceError, STATUS_BY_CODE, statusOf } from '../../src/service/errors.js';
import { parseFrequency } from '../../src/service/profiles.js';
import { decodeQueryOptions, maxPageSizeOf } from '../../src/service/request.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

describe('the status table', () => {
  it('maps codes in one place: listed codes, QueryErrors default to 400, anything else is 500', () => {
    expect(statusOf(new ServiceError('NotFound', 'x'))).toBe(404);
    expect(statusOf(new ServiceError('MissingToken', 'x'))).toBe(401);
    expect(statusOf(new ServiceError('QueryStringTooLong', 'x'))).toBe(414);
    expect(statusOf(new QueryError('InvalidSyntax', 'x'))).toBe(400);
    expect(statusOf(new QueryError('SomethingNew', 'x'))).toBe(400);
    expect(statusOf(new QueryError('InternalError', 'x'))).toBe(500);
    expect(statusOf(new TypeError('x'))).toBe(500);
    expect(statusOf('a string')).toBe(500);
    expect(statusOf(new BackendUnavailableError('x'))).toBe(503);
    expect(new Set(Object.values(STATUS_BY_CODE))).toEqual(new Set([400, 401, 403, 404, 405, 413, 414, 429, 431, 500, 501, 503]));
  });

  it('lists every code the service and the adapter raise', () => {
    const files = ['src/adapters/http.ts', ...readdirSync(path.join(repo, 'src/service')).map((f) => `src/service/${f}`)];
    const codes = new Set<string>();
    for (const f of files) {
      const text = readFileSync(path.join(repo, f), 'utf8');
      for (const m of text.matchAll(/(?:new ServiceError|rawError)\(\s*'(\w+)'/g)) codes.add(m[1]);
    }
    expect(codes.size).toBeGreaterThan(10);
    for (const code of codes) expect(STATUS_BY_CODE, code).toHaveProperty(code);
  });

  it('writes the error object with only the members that are set, never a stack', () => {
    expect(errorObject(new QueryError('A', 'm'))).toEqual({ code: 'A', message: 'm' });
    const full = errorObject(
      new QueryError('A', 'm', {
        option: '$filter',
        position: 0,
        details: [
          { code: 'B', message: 'n', target: 't' },
          { code: 'C', message: 'o' },
        ],
      }),
    );
    expect(full).toEqual({
      code: 'A',
      message: 'm',
      target: '$filter',
      position: 0,
      details: [
        { code: 'B', message: 'n', target: 't' },
        { code: 'C', message: 'o' },
      ],
    });
    expect(Object.keys(full)).toEqual(['code', 'message', 'target', 'position', 'details']);
    expect(JSON.stringify(errorObject(new QueryError('A', 'm')))).not.toContain('stack');
  });
});

describe('query-string decoding', () => {
  it('decodes form-style and keeps only $ options', () => {
    expect(decodeQueryOptions('')).toBe('');
    expect(decodeQueryOptions("$filter=City+eq+'A%2BB'&$top=5")).toBe("$filter=City eq 'A+B'&$top=5");
    expect(decodeQueryOptions("$filter=City%20eq%20'A%26B'")).toBe("$filter=City eq 'A&B'");
    expect(decodeQueryOptions('a=1&%24top=2&&b=%26%24skip%3D9&$count')).toBe('$top=2&$count');
    expect(decodeQueryOptions("$filter=City eq 'Ÿ'")).toBe("$filter=City eq 'Ÿ'");
    expect(decodeQueryOptions('$filter=x%C3%A9')).toBe('$filter=xé');
    expect(decodeQueryOptions('bad=%ZZ&$top=1')).toBe('$top=1');
  });

  it('rejects bad percent-encoding in a $ option', () => {
    for (const raw of ['$filter=%ZZ', '$filter=%E0%A4', '%24to%ZZp=1', '$top=%']) {
      let err: unknown;
      try {
        decodeQueryOptions(raw);
      } catch (e) {
        err = e;
      }
      expect(err, raw).toBeInstanceOf(ServiceError);
      expect((err as ServiceError).code).toBe('InvalidPercentEncoding');
    }
  });

  it('reads odata.maxpagesize from Prefer', () => {
    expect(maxPageSizeOf(null)).toBeUndefined();
    expect(maxPageSizeOf('odata.maxpagesize=50')).toBe(50);
    expect(maxPageSizeOf('maxpagesize=7')).toBe(7);
    expect(maxPageSizeOf('return=minimal, odata.maxpagesize = "20"')).toBe(20);
    expect(maxPageSizeOf('ODATA.MAXPAGESIZE=3')).toBe(3);
    for (const v of ['odata.maxpagesize=0', 'odata.maxpagesize=-1', 'odata.maxpagesize=1.5', 'odata.maxpagesize=', 'respond-async'])
      expect(maxPageSizeOf(v), v).toBeUndefined();
  });
});

describe('update frequencies', () => {
  it('normalize to "<number> <unit>" and hours as a decimal string', () => {
    const cases: Array<[string, string, string]> = [
      ['12 hours', '12 hours', '12'],
      ['1 hour', '1 hour', '1'],
      ['1 day', '1 day', '24'],
      ['15 minutes', '15 minutes', '0.25'],
      ['1 week', '1 week', '168'],
      ['2 weeks', '2 weeks', '336'],
      ['1 minutes', '1 minute', '0.016667'],
      ['45 min', '45 minutes', '0.75'],
      ['0.5 hours', '0.5 hours', '0.5'],
      ['  3 Days ', '3 days', '72'],
      ['20 minutes', '20 minutes', '0.333333'],
    ];
    for (const [input, text, hours] of cases) expect(parseFrequency(input), input).toEqual({ text, hours });
    for (const bad of ['', 'daily', '0 hours', '12', 'hours 12', '1 fortnight', '-1 day']) expect(parseFrequency(bad), bad).toBeNull();
  });
});
