// Shared by the tests of the SQLite and PostgreSQL journals: the two backends behind journal
// URLs, and a throwaway PostgreSQL cluster started with the project's own
// scripts/postgres.sh under a temporary directory, on a port of its own, stopped when the
// test file ends (and when its process exits). PostgreSQL is skipped only when it is not
// installed, saying why (the script's exit status 3).
import { spawn, spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { after } from 'node:test';
import { createRequire } from 'node:module';
import { PKG, REPO, tempDir } from './helpers.js';

const require = createRequire(import.meta.url);
const SCRIPT = join(REPO, 'scripts/postgres.sh');

/** @typedef {{ name: 'sqlite' | 'postgres', fresh(): Promise<string>, query(url: string, sql: string): Promise<string[]>, execute(url: string, sql: string): Promise<void> }} Backend */

/** @param {string} verb @param {string} dir @param {string} port */
function script(verb, dir, port) {
  const r = spawnSync('bash', [SCRIPT, verb, dir], { encoding: 'utf8', env: { ...process.env, PGPORT: port } });
  return { status: r.status, out: r.stdout.trim(), err: r.stderr.trim() };
}

let sqliteN = 0;
/** @type {Backend} */
export const sqlite = {
  name: 'sqlite',
  async fresh() {
    const dir = tempDir('interlock-node-sqlite-');
    after(() => rmSync(dir, { recursive: true, force: true }));
    return `sqlite://${dir}/j${sqliteN++}/journal.db`;
  },
  async query(url, sql) {
    const Database = require('better-sqlite3');
    const db = new Database(url.slice('sqlite://'.length));
    try {
      return db.prepare(sql).raw().all().map((r) => (typeof r[0] === 'string' ? r[0] : `${r[0]}`));
    } finally {
      db.close();
    }
  },
  async execute(url, sql) {
    const Database = require('better-sqlite3');
    const db = new Database(url.slice('sqlite://'.length));
    try {
      db.exec(sql);
    } finally {
      db.close();
    }
  },
};

/**
 * A PostgreSQL cluster for this test file: `{ backend }`, or `{ skip }` (why) when PostgreSQL
 * is not installed. Started once, on first use; stopped when the process exits.
 * @returns {{ backend: Backend & { url: string, restart(): void, loseCommitAcknowledgements(): Promise<() => Promise<void>> }, skip?: undefined } | { skip: string, backend?: undefined }}
 */
export function postgres() {
  cluster ??= startCluster();
  return cluster;
}

/** @type {ReturnType<typeof startCluster> | undefined} */
let cluster;

function startCluster() {
  const dir = tempDir('interlock-node-pg-');
  // A port of its own: the socket is in `dir` anyway, but so the server's shared memory key
  // never meets another test's cluster.
  const port = String(56000 + Math.floor(Math.random() * 4000));
  const check = script('check', dir, port);
  if (check.status === 3) {
    rmSync(dir, { recursive: true, force: true });
    return { skip: `PostgreSQL is not installed: ${check.err}` };
  }
  const started = script('start', dir, port);
  if (started.status !== 0) throw new Error(`scripts/postgres.sh start failed (${started.status}): ${started.err}`);
  const stop = () => {
    script('stop', dir, port);
    rmSync(dir, { recursive: true, force: true });
  };
  let stopped = false;
  const once = () => {
    if (!stopped) {
      stopped = true;
      stop();
    }
  };
  // When this test file's process ends, however it ends short of SIGKILL.
  process.on('exit', once);
  for (const signal of ['SIGINT', 'SIGTERM']) process.once(signal, () => process.exit(128 + (signal === 'SIGINT' ? 2 : 15)));
  const url = started.out;
  let n = 0;
  /** @param {string} u @param {(c: import('pg').Client) => Promise<any>} f */
  const withClient = async (u, f) => {
    const { Client } = require('pg');
    const c = new Client({ connectionString: u });
    await c.connect();
    try {
      return await f(c);
    } finally {
      await c.end();
    }
  };
  return {
    backend: {
      name: /** @type {const} */ ('postgres'),
      url,
      /**
       * A new, empty journal: a schema of its own in one database (`options=-csearch_path`,
       * as the Rust crate's README shows). Schemas are cheap; a database per journal would
       * make the cluster's shutdown checkpoint write each database's copy of its template.
       */
      async fresh() {
        const base = url.replace(/\/postgres$/, '/journals');
        if (n === 0) await withClient(url, (c) => c.query('CREATE DATABASE journals'));
        const schema = `j${n++}`;
        await withClient(base, (c) => c.query(`CREATE SCHEMA ${schema}`));
        return `${base}?options=-csearch_path%3D${schema}`;
      },
      /** @param {string} u @param {string} sql */
      async query(u, sql) {
        const res = await withClient(u, (c) => c.query({ text: sql, rowMode: 'array' }));
        return res.rows.map((/** @type {unknown[]} */ r) => String(r[0]));
      },
      /** @param {string} u @param {string} sql */
      async execute(u, sql) {
        await withClient(u, (c) => c.query(sql));
      },
      /**
       * Makes the next durable commits wait for a synchronous standby that never answers,
       * and ends the session of the first one that waits (from another process, since the
       * journal's caller is blocked in that commit): its client never gets the commit's
       * acknowledgement, though the commit is recorded. Resolves to `restore()`.
       */
      async loseCommitAcknowledgements() {
        await withClient(url, async (c) => {
          await c.query("ALTER SYSTEM SET synchronous_standby_names = 'nobody'");
          await c.query('SELECT pg_reload_conf()');
        });
        const killer = spawn(process.execPath, ['--input-type=module', '-e', `
          import { createRequire } from 'node:module';
          const { Client } = createRequire(${JSON.stringify(join(PKG, 'package.json'))})('pg');
          const c = new Client({ connectionString: ${JSON.stringify(url)} });
          await c.connect();
          for (;;) {
            const r = await c.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep'");
            if (r.rowCount > 0) break;
            await new Promise((res) => setTimeout(res, 20));
          }
          await c.end();
        `], { stdio: 'inherit' });
        const ended = new Promise((resolve) => killer.on('exit', resolve));
        return async () => {
          killer.kill();
          await ended;
          await withClient(url, async (c) => {
            await c.query('ALTER SYSTEM RESET synchronous_standby_names');
            await c.query('SELECT pg_reload_conf()');
          });
        };
      },
      /** Stops the server (fast shutdown: sessions are ended) and starts it again. */
      restart() {
        for (const verb of ['stop', 'start']) {
          const r = script(verb, dir, port);
          if (r.status !== 0) throw new Error(`scripts/postgres.sh ${verb} failed: ${r.err}`);
        }
      },
    },
  };
}

/** A canonical-looking entry (sorted keys, no spaces), as the Rust contract tests use. */
export const entry = (stream, seq, open) => `{"data":"payload ${stream} ${seq}","open":${open},"seq":${seq},"stream":"${stream}"}`;
export const entries = (stream, from, n, open) => Array.from({ length: n }, (_, i) => entry(stream, from + i, open));
