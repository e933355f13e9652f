#!/usr/bin/env node
// interlock-export JOURNAL --to otlp=URL|bigquery|cloud-logging|siem [--out PATH] [--name N]
// [--content] [--batch N]: Interlock.export from the command line, as `interlock export`.
// Prints the run's report as JSON; exit 2 on an export error (nothing recorded), 1 when
// the sink did not take a batch (the position stays).
import { parseArgs } from 'node:util';
import { Interlock, ExportError } from './index.js';
import { runExport } from './export.js';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    to: { type: 'string' },
    out: { type: 'string' },
    name: { type: 'string' },
    content: { type: 'boolean', default: false },
    batch: { type: 'string', default: '512' },
  },
});
if (positionals.length !== 1 || values.to === undefined) {
  process.stderr.write('usage: interlock-export JOURNAL --to otlp=URL|bigquery|cloud-logging|siem [--out PATH] [--name NAME] [--content] [--batch N]\n');
  process.exit(2);
}
const gate = await Interlock.open(positionals[0]);
try {
  const r = await runExport(gate.gate, values.to, { out: values.out, name: values.name, content: values.content, maxRecords: Number(values.batch) });
  process.stdout.write(`${JSON.stringify(r)}\n`);
} catch (e) {
  process.stderr.write(`interlock export: ${/** @type {Error} */ (e).message}\n`);
  process.exitCode = e instanceof ExportError ? 2 : 1;
} finally {
  gate.close();
}
