/**
 * $metadata: describes exactly the loaded schema, and validates against the OASIS CSDL 4.01 XML
 * schemas with xmllint (Debian's libxml2-utils, installed by .ci/run). Without xmllint or
 * ../shared/conformance the validation tests are skipped, saying why.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
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
const XSD_DIR = path.resolve(repo, '../shared/conformance/oasis-odata-csdl-xsd/4.01');
const hasXmllint = spawnSync('xmllint', ['--version'], { stdio: 'ignore' }).status === 0;
const hasXsd = existsSync(path.join(XSD_DIR, 'edmx.xsd')) && existsSync(path.join(XSD_DIR, 'edm.xsd'));
const skipReason = !hasXmllint
  ? 'xmllint is not installed (Debian: apt-get install libxml2-utils; .ci/run does this)'
  : !hasXsd
    ? `the OASIS CSDL XSDs are not at ${XSD_DIR} (../shared/conformance beside the repository)`
    : null;
if (skipReason) console.warn(`$metadata XSD validation skipped: ${skipReason}`);

let work = '';
let engine: Engine;
let xml = '';

beforeAll(async () => {
  engine = await defaultEngine();
  const { handler } = await makeHandler();
  const token = await login(handler);
  xml = (await call(handler, '/v1/listings/data/$metadata', { token })).text;
  if (!skipReason) {
    // edmx.xsd imports edm.xsd without a location: point it at the copy beside it (conformance README)
    work = mkdtempSync(path.join(os.tmpdir(), 'reso-csdl-'));
    writeFileSync(path.join(work, 'edm.xsd'), readFileSync(path.join(XSD_DIR, 'edm.xsd')));
    const edmx = readFileSync(path.join(XSD_DIR, 'edmx.xsd'), 'utf8').replace(
      /<xs:import namespace="http:\/\/docs\.oasis-open\.org\/odata\/ns\/edm"\s*\/>/,
      '<xs:import namespace="http://docs.oasis-open.org/odata/ns/edm" schemaLocation="edm.xsd" />',
    );
    expect(edmx).toContain('schemaLocation="edm.xsd"');
    writeFileSync(path.join(work, 'edmx.xsd'), edmx);
  }
});

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

function validate(doc: string): { ok: boolean; output: string } {
  const file = path.join(work, `doc-${Math.random().toString(36).slice(2)}.xml`);
  writeFileSync(file, doc);
  const r = spawnSync('xmllint', ['--noout', '--schema', path.join(work, 'edmx.xsd'), file], { encoding: 'utf8' });
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
    for (const other of ['Media', 'OpenHouse', 'PropertyChange', 'Member', 'Office', 'EntityEvent'])
      expect(entityType(xml, other)).not.toContain('NavigationProperty');
    expect(entityType(xml, 'Member')).toContain('<Key><PropertyRef Name="MemberKey"/></Key>');
    expect(entityType(xml, 'Office')).toContain('<Property Name="OriginatingSystemName" Type="Edm.String"/>');
    expect([...xml.matchAll(/<EntitySet Name="(\w+)"/g)].map((m) => m[1])).toEqual(['Property', 'Media', 'OpenHouse', 'Member', 'Office', 'EntityEvent']);
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

  it('is a real check: xmllint rejects a document that breaks the schema', () => {
    const broken = xml.replace('<Key><PropertyRef Name="ListingKey"/></Key>', '<Key/>');
    expect(broken).not.toBe(xml);
    expect(validate(broken).ok).toBe(false);
    expect(validate(xml.replace('Version="4.01"', 'Version="5.0"')).ok).toBe(false);
    expect(validate(xml.replace('<Property Name="ListPrice"', '<Property Name="List Price"')).ok).toBe(false);
  });
});
