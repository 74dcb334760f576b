/**
 * Loads the OASIS OData ABNF test cases (odata-abnf-testcases.yaml and
 * odata-aggregation-testcases.yaml) and maps each one that concerns the query options of
 * SERVICE.md §3 onto a parseQuery call: the percent-encoded input is decoded (keeping a map from
 * decoded offsets back to encoded ones, since FailAt counts encoded characters), wrapped in the
 * query option that holds the rule (`$filter=` for expression rules, `$select=` for identifiers,
 * ...), and the expected failure offset is carried over.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';

export const CONFORMANCE_DIR = path.resolve(import.meta.dirname, '../../../shared/conformance/oasis-odata-abnf');

interface RawCase {
  readonly Name: string;
  readonly Rule: string;
  readonly Input: string;
  readonly FailAt?: number;
}

export interface ConformanceCase {
  /** `file: name [rule]` */
  readonly id: string;
  readonly file: string;
  readonly name: string;
  readonly rule: string;
  /** The case's input as written (percent-encoded). */
  readonly input: string;
  /** The decoded query string given to parseQuery. */
  readonly query: string;
  /** For negative cases: FailAt, an offset into `input`. */
  readonly failAt: number | undefined;
  /** Maps an offset in `query` to the offset in `input` it came from. */
  readonly toInput: (queryOffset: number) => number;
}

/** How the input of each supported rule becomes a query string. */
const WRAPPERS: Readonly<Record<string, string>> = {
  // whole query strings
  queryOptions: '',
  systemQueryOption: '',
  filter: '',
  orderby: '',
  orderBy: '',
  select: '',
  expand: '',
  // expressions
  boolCommonExpr: '$filter=',
  boolcommonExpr: '$filter=',
  commonExpr: '$filter=',
  notExpr: '$filter=',
  firstMemberExpr: '$filter=',
  propertyPathExpr: '$filter=',
  anyExpr: '$filter=Items/',
  // literals (in URL form; a literal alone is a valid $filter expression)
  boolean: '$filter=',
  date: '$filter=',
  dateTimeOffsetLiteral: '$filter=',
  dateTimeOffsetValueInUrl: '$filter=',
  dateTimeOffsetValue: '$filter=',
  decimalLiteral: '$filter=',
  decimalValue: '$filter=',
  doubleLiteral: '$filter=',
  doubleValue: '$filter=',
  singleLiteral: '$filter=',
  singleValue: '$filter=',
  sbyteLiteral: '$filter=',
  int16Literal: '$filter=',
  int32Literal: '$filter=',
  int64Literal: '$filter=',
  stringLiteral: '$filter=',
  primitiveLiteral: '$filter=',
  geographyPoint: '$filter=',
  // names
  odataIdentifier: '$select=',
};

/** Rules whose input is a URL: the part after `?` is the query string. */
const URL_RULES = new Set(['odataRelativeUri', 'odataUri']);

/**
 * Percent-decodes `text` as a query string value is decoded before parseQuery sees it, and
 * returns for each decoded offset the encoded offset it came from.
 */
export function decodeWithMap(text: string): { decoded: string; map: number[] } {
  let decoded = '';
  const map: number[] = [];
  let i = 0;
  while (i < text.length) {
    if (text[i] === '%' && /^%[0-9A-Fa-f]{2}/.test(text.slice(i, i + 3))) {
      // A run of %XX is one UTF-8 byte sequence.
      let j = i;
      while (j < text.length && /^%[0-9A-Fa-f]{2}/.test(text.slice(j, j + 3))) j += 3;
      let chunk: string;
      try {
        chunk = decodeURIComponent(text.slice(i, j));
      } catch {
        chunk = text.slice(i, j);
      }
      const perChar = chunk.length === (j - i) / 3;
      for (let k = 0; k < chunk.length; k++) {
        decoded += chunk[k];
        map.push(perChar ? i + 3 * k : i);
      }
      i = j;
    } else {
      decoded += text[i];
      map.push(i);
      i++;
    }
  }
  map.push(text.length);
  return { decoded, map };
}

function load(file: string): RawCase[] {
  const doc = parseYaml(readFileSync(path.join(CONFORMANCE_DIR, file), 'utf8')) as { TestCases: RawCase[] };
  return doc.TestCases;
}

export function conformanceAvailable(): boolean {
  return existsSync(path.join(CONFORMANCE_DIR, 'odata-abnf-testcases.yaml')) && existsSync(path.join(CONFORMANCE_DIR, 'odata-aggregation-testcases.yaml'));
}

/** All cases of the rules above (and URL cases with a query part), mapped; the rest are counted. */
export function loadConformanceCases(): { cases: ConformanceCase[]; otherRules: number } {
  const cases: ConformanceCase[] = [];
  let otherRules = 0;
  for (const file of ['odata-abnf-testcases.yaml', 'odata-aggregation-testcases.yaml']) {
    for (const c of load(file)) {
      const input = String(c.Input ?? '');
      let prefix: string;
      let body: string;
      let bodyStart: number;
      if (c.Rule in WRAPPERS) {
        prefix = WRAPPERS[c.Rule];
        body = input;
        bodyStart = 0;
      } else if (URL_RULES.has(c.Rule) && input.includes('?')) {
        const q = input.indexOf('?') + 1;
        // A failure in the resource path is not ours to test.
        if (c.FailAt !== undefined && c.FailAt < q) {
          otherRules++;
          continue;
        }
        prefix = '';
        body = input.slice(q);
        bodyStart = q;
      } else {
        otherRules++;
        continue;
      }
      const { decoded, map } = decodeWithMap(body);
      cases.push({
        id: `${file.replace('-testcases.yaml', '')}: ${c.Name} [${c.Rule}] ${JSON.stringify(input)}`,
        file,
        name: c.Name,
        rule: c.Rule,
        input,
        query: prefix + decoded,
        failAt: c.FailAt,
        toInput: (offset) => {
          const inBody = offset - prefix.length;
          if (inBody < 0) return -1;
          return bodyStart + map[Math.min(inBody, map.length - 1)];
        },
      });
    }
  }
  return { cases, otherRules };
}
