// The journal-format component in Node: its core module is compiled from gen/ on first use,
// synchronously (FileJournal.open is synchronous).
import { readFileSync } from 'node:fs';
import { useCoreModules } from './format.js';

const base = new URL('../../gen/journal-format/', import.meta.url);
useCoreModules((name) => new WebAssembly.Module(readFileSync(new URL(name, base))));
