/**
 * $metadata: describes exactly the loaded schema, and validates against the OASIS CSDL 4.01 XML
 * schemas with xmllint (Debian's libxml2-utils, installed by .ci/run). Without xmllint or
 * ../shared/conformance the validation tests are skipped, saying why.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Engine } from '../../src/engine.js';
import { metadataXml } from '../../src/service/edmx.js';
import { SEARCH_FIELDS } from '../../src/schema/search-fields.js';
import { isHiddenField, RESOURCE_NAMES } from '../../src/schema/types.js';
import { odataKeyOf } from '../../src/schema/catalog.js';
import { call, defaultEngine, login, makeHandler, NOW } from './helpers.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const XSD_ROOT = path.resolve(repo, '../shared/conformance/oasis-odata-csdl-xsd');
/** The OASIS XSDs per OData version (`$metadata` answers 4.0 to a client that accepts only 4.0). */
const XSD_DIRS = { '4.01': path.join(XSD_ROOT, '4.01'), '4.0': path.join(XSD_ROOT, '4.0-errata03') } as const;
const hasXmllint = spawnSync('xmllint', ['--version'], { stdio: 'ignore' }).status === 0;
const hasXsd = Object.values(XSD_DIRS).every((dir) => existsSync(path.join(dir, 'edmx.xsd')) && existsSync(path.join(dir, 'edm.xsd')));
const skipReason = !hasXmllint
  ? 'xmllint is not installed (Debian: apt-get install libxml2-utils; .ci/run does this)'
  : !hasXsd
    ? `the OASIS CSDL XSDs are not under ${XSD_ROOT} (../shared/conformance beside the repository)`
    : null;
if (skipReason) console.warn(`$metadata XSD validation skipped: ${skipReason}`);

let work = '';
let engine: Engine;
let xml = '';
let xml40 = '';

beforeAll(async () => {
  engine = await defaultEngine();
  const { handler } = await makeHandler();
  const token = await login(handler);
  xml = (await call(handler, '/v1/listings/data/$metadata', { token })).text;
  xml40 = (await call(handler, '/v1/listings/data/$metadata', { token, headers: { 'OData-MaxVersion': '4.0' } })).text;
  if (!skipReason) {
    // edmx.xsd imports edm.xsd without a location: point it at the copy beside it (conformance README)
    work = mkdtempSync(path.join(os.tmpdir(), 'reso-csdl-'));
    for (const [version, dir] of Object.entries(XSD_DIRS)) {
      mkdirSync(path.join(work, version));
      writeFileSync(path.join(work, version, 'edm.xsd'), readFileSync(path.join(dir, 'edm.xsd')));
      const edmx = readFileSync(path.join(dir, 'edmx.xsd'), 'utf8').replace(
        /<xs:import namespace="http:\/\/docs\.oasis-open\.org\/odata\/ns\/edm"\s*\/>/,
        '<xs:import namespace="http://docs.oasis-open.org/odata/ns/edm" schemaLocation="edm.xsd" />',
      );
      expect(edmx).toContain('schemaLocation="edm.xsd"');
      writeFileSync(path.join(work, version, 'edmx.xsd'), edmx);
    }
  }
});

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

function validate(doc: string, version: keyof typeof XSD_DIRS = '4.01'): { ok: boolean; output: string } {
  const file = path.join(work, `doc-${Math.random().toString(36).slice(2)}.xml`);
  writeFileSync(file, doc);
  const r = spawnSync('xmllint', ['--noout', '--schema', path.join(work, version, 'edmx.xsd'), file], { encoding: 'utf8' });
  return { ok: r.status === 0, output: `${r.stdout}${r.stderr}` };
}

/** The `<EntityType Name="X">...</EntityType>` block. */
function entityType(doc: string, name: string): string {
  const m = new RegExp(`<EntityType Name="${name}">([\\s\\S]*?)</EntityType>`).exec(doc);
  if (!m) throw new Error(`no EntityType ${name}`);
  return m[1];
}

describe('$metadata content', () => {
  it('declares every field of every table, in schema order, with its type, key and lookup', () => {
    for (const resource of RESOURCE_NAMES) {
      const block = entityType(xml, resource);
      const schema = engine.store.table(resource).schema;
      // the key clients see (EntityEvent: EntityEventSequence, its storage key hidden), first
      const key = odataKeyOf(resource);
      expect(block).toContain(`<Key><PropertyRef Name="${key}"/></Key>`);
      const declared = [...block.matchAll(/<Property Name="([^"]+)" Type="([^"]+)"/g)].map((m) => `${m[1]}:${m[2]}`);
      const exposed = [schema.field(key)!, ...schema.fields.filter((f) => !isHiddenField(f) && f.name !== key)];
      expect(declared).toEqual(exposed.map((f) => `${f.name}:${f.collection ? `Collection(${f.type})` : f.type}`));
      if (resource !== 'EntityEvent') expect(exposed).toEqual(schema.fields);
      for (const f of exposed) {
        if (f.name === key) expect(block).toContain(`<Property Name="${f.name}" Type="${f.type}" Nullable="false"/>`);
        if (f.lookup)
          expect(block).toMatch(
            new RegExp(`<Property Name="${f.name}" [^>]*><Annotation Term="RESO.OData.Metadata.LookupName" String="${f.lookup.split('.').pop()}"/></Property>`),
          );
      }
    }
    const property = entityType(xml, 'Property');
    expect(property).toContain(
      '<Property Name="StandardStatus" Type="Edm.String"><Annotation Term="RESO.OData.Metadata.LookupName" String="StandardStatus"/></Property>',
    );
    expect(property).toContain(
      '<Property Name="Appliances" Type="Collection(Edm.String)"><Annotation Term="RESO.OData.Metadata.LookupName" String="Appliances"/></Property>',
    );
    expect(property).toContain('<Property Name="ListPrice" Type="Edm.Decimal" Scale="variable"/>');
    expect(property).toContain('<Property Name="BedroomsTotal" Type="Edm.Int64"/>');
    expect(property).toContain('<Property Name="ModificationTimestamp" Type="Edm.DateTimeOffset"/>');
    expect(property).toContain('<Property Name="ListingContractDate" Type="Edm.Date"/>');
    expect(property).toContain('<Property Name="Location" Type="Edm.GeographyPoint" SRID="4326"/>');
    expect(property).toContain('<Property Name="DaysOnMarket" Type="Edm.Int64"/>');
    expect(property).toContain('<Property Name="service_OriginalEntryTimestamp" Type="Edm.DateTimeOffset"/>');
    for (const s of SEARCH_FIELDS) expect(xml).not.toContain(`"${s}"`);
  });

  it('answers Version="4.0" to a client that accepts only 4.0, and is otherwise the same document', () => {
    expect(xml).toContain('<edmx:Edmx xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx" Version="4.01">');
    expect(xml40).toContain('<edmx:Edmx xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx" Version="4.0">');
    expect(xml40.replace('Version="4.0"', 'Version="4.01"')).toBe(xml);
  });

  it('declares the navigation properties of the expansions and the entity sets of the top-level paths', () => {
    const property = entityType(xml, 'Property');
    expect([...property.matchAll(/<NavigationProperty [^>]*\/>/g)].map((m) => m[0])).toEqual([
      '<NavigationProperty Name="Media" Type="Collection(org.reso.metadata.Media)"/>',
      '<NavigationProperty Name="OpenHouse" Type="Collection(org.reso.metadata.OpenHouse)"/>',
      '<NavigationProperty Name="PreferredMedia" Type="Collection(org.reso.metadata.Media)"/>',
      '<NavigationProperty Name="PropertyChange" Type="Collection(org.reso.metadata.PropertyChange)" ContainsTarget="true"/>',
    ]);
    // the single-valued agents and offices, each constrained by its key field on Property
    const single = [
      ...property.matchAll(
        /<NavigationProperty Name="(\w+)" Type="([\w.]+)" Nullable="true">\s*<ReferentialConstraint Property="(\w+)" ReferencedProperty="(\w+)"\/>/g,
      ),
    ];
    expect(single.map((m) => m.slice(1).join(' '))).toEqual([
      'ListAgent org.reso.metadata.Member ListAgentKey MemberKey',
      'BuyerAgent org.reso.metadata.Member BuyerAgentKey MemberKey',
      'CoListAgent org.reso.metadata.Member CoListAgentKey MemberKey',
      'CoBuyerAgent org.reso.metadata.Member CoBuyerAgentKey MemberKey',
      'ListOffice org.reso.metadata.Office ListOfficeKey OfficeKey',
      'BuyerOffice org.reso.metadata.Office BuyerOfficeKey OfficeKey',
      'CoListOffice org.reso.metadata.Office CoListOfficeKey OfficeKey',
      'CoBuyerOffice org.reso.metadata.Office CoBuyerOfficeKey OfficeKey',
    ]);
    for (const other of ['Media', 'OpenHouse', 'PropertyChange', 'Member', 'Office', 'Lookup', 'EntityEvent'])
      expect(entityType(xml, other)).not.toContain('NavigationProperty');
    expect(entityType(xml, 'Member')).toContain('<Key><PropertyRef Name="MemberKey"/></Key>');
    expect(entityType(xml, 'Office')).toContain('<Property Name="OriginatingSystemName" Type="Edm.String"/>');
    expect([...xml.matchAll(/<EntitySet Name="(\w+)"/g)].map((m) => m[1])).toEqual([
      'Property',
      'Media',
      'OpenHouse',
      'Member',
      'Office',
      'Lookup',
      'EntityEvent',
    ]);
    expect(entityType(xml, 'EntityEvent')).toContain('<Property Name="EntityEventSequence" Type="Edm.Int64" Nullable="false"/>');
    expect(entityType(xml, 'EntityEvent')).not.toContain('service_EntityEventKey');
    expect(xml).toContain('<NavigationPropertyBinding Path="PreferredMedia" Target="Media"/>');
    expect(xml).toContain('<NavigationPropertyBinding Path="ListAgent" Target="Member"/>');
    expect(xml).toContain('<NavigationPropertyBinding Path="CoBuyerOffice" Target="Office"/>');
  });

  it('follows the data set: local fields appear with their inferred types, unaddressable names do not', async () => {
    const small = await Engine.open({
      data: {
        Property: [
          {
            ListingKey: 'A1',
            OriginatingSystemName: 'HAR',
            ListPrice: 1,
            X_Flag: true,
            X_Score: 2.5,
            X_Seen: '2024-01-02T03:04:05Z',
            X_Tags: ['a'],
            'bad name': 1,
          },
          { ListingKey: 'A2', OriginatingSystemName: 'HAR', X_Score: 3 },
        ],
      },
      now: () => new Date(NOW),
    });
    const doc = metadataXml((r) => small.store.table(r).schema);
    const property = entityType(doc, 'Property');
    expect(property).toContain('<Property Name="X_Flag" Type="Edm.Boolean"/>');
    expect(property).toContain('<Property Name="X_Score" Type="Edm.Decimal" Scale="variable"/>');
    expect(property).toContain('<Property Name="X_Seen" Type="Edm.DateTimeOffset"/>');
    expect(property).toContain('<Property Name="X_Tags" Type="Collection(Edm.String)"/>');
    expect(property).not.toContain('bad name');
    // declared fields the data never carries are not there
    expect(property).not.toContain('"BedroomsTotal"');
    if (!skipReason) expect(validate(doc)).toEqual({ ok: true, output: expect.stringContaining('validates') });
  });
});

describe.skipIf(skipReason !== null)(`$metadata against the OASIS CSDL 4.01 XSD${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  it('validates with xmllint', () => {
    const r = validate(xml);
    expect(r.output).toContain('validates');
    expect(r.ok).toBe(true);
  });

  it('the 4.0 answer validates against the CSDL 4.0 XSD (and the 4.01 one does not: its Version is 4.01)', () => {
    expect(validate(xml40, '4.0')).toEqual({ ok: true, output: expect.stringContaining('validates') });
    expect(validate(xml, '4.0').ok).toBe(false);
  });

  it('is a real check: xmllint rejects a document that breaks the schema', () => {
    const broken = xml.replace('<Key><PropertyRef Name="ListingKey"/></Key>', '<Key/>');
    expect(broken).not.toBe(xml);
    expect(validate(broken).ok).toBe(false);
    expect(validate(xml.replace('Version="4.01"', 'Version="5.0"')).ok).toBe(false);
    expect(validate(xml.replace('<Property Name="ListPrice"', '<Property Name="List Price"')).ok).toBe(false);
  });
});
