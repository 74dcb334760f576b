#!/usr/bin/env node
/**
 * The `reso-engine` command line. Each subcommand validates its arguments and calls the library;
 * errors are one line on stderr and exit code 2 (usage) or 1 (failure), never a stack trace.
 */
import { parseArgs } from 'node:util';
import { generateDataset, DEFAULT_REFERENCE } from '../generate/dataset.js';

const USAGE = `Usage:
  reso-engine generate --listings N --seed S --out DIR [--reference ISO-INSTANT]
      Writes a deterministic data set (Property, Media, OpenHouse, PropertyChange as JSON Lines,
      accounts.json, mls_profiles.json). Same N, seed and reference give the same bytes.
      --reference defaults to ${DEFAULT_REFERENCE}; every timestamp lies before it.
  reso-engine help
`;

class UsageError extends Error {}

function runGenerate(argv: string[]): void {
  const { values } = parseArgs({
    args: argv,
    options: {
      listings: { type: 'string' },
      seed: { type: 'string', default: '1' },
      out: { type: 'string' },
      reference: { type: 'string', default: DEFAULT_REFERENCE },
    },
    strict: true,
  });
  const listings = Number(values.listings?.replace(/_/g, ''));
  if (values.listings === undefined || !Number.isInteger(listings) || listings < 0) {
    throw new UsageError(`--listings takes a non-negative integer, got '${values.listings ?? ''}'`);
  }
  if (!values.out) throw new UsageError('--out DIR is required');
  const tty = process.stderr.isTTY === true;
  const started = Date.now();
  const summary = generateDataset({
    listings,
    seed: values.seed,
    reference: values.reference,
    outDir: values.out,
    onProgress: tty
      ? (done, total) => {
          const pct = total === 0 ? 100 : Math.floor((done / total) * 100);
          process.stderr.write(`\rgenerating ${pct}% (${done.toLocaleString('en-US')}/${total.toLocaleString('en-US')} listings)`);
        }
      : undefined,
  });
  if (tty) process.stderr.write('\n');
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  process.stdout.write(
    `wrote ${summary.listings} listings, ${summary.media} media, ${summary.openHouses} open houses, ` +
      `${summary.propertyChanges} property changes to ${values.out} in ${seconds} s\n`,
  );
}

function main(argv: string[]): number {
  const [command, ...rest] = argv;
  try {
    switch (command) {
      case 'generate':
        runGenerate(rest);
        return 0;
      case undefined:
      case 'help':
      case '--help':
      case '-h':
        process.stdout.write(USAGE);
        return command === undefined ? 2 : 0;
      default:
        throw new UsageError(`unknown command '${command}'`);
    }
  } catch (err) {
    if (err instanceof UsageError || (err instanceof TypeError && 'code' in err && String(err.code).startsWith('ERR_PARSE_ARGS'))) {
      process.stderr.write(`reso-engine: ${err.message}\n\n${USAGE}`);
      return 2;
    }
    process.stderr.write(`reso-engine: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
}

process.exitCode = main(process.argv.slice(2));
