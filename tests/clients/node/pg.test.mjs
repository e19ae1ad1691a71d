// node-postgres (pg) direct vs through predrop. Run by tests/clients/test_node.sh (node --test).
// The same scenario runs against a fresh database directly and through predrop; the transcripts
// (results, error fields, notices, notifications; no PIDs, no timings) must be identical.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

const here = path.dirname(fileURLToPath(import.meta.url));
const support = path.join(here, '..', '..', 'support');
const HOST = process.env.PGHOST || '127.0.0.1';
const DIRECT_PORT = Number(process.env.PGPORT);
const USER = process.env.PGUSER || 'postgres';
const DB = 'cl_node';
// A run that cannot reach the cluster fails (tests/clients/test_node.sh checks this too).
if (!DIRECT_PORT) throw new Error('PGHOST/PGPORT unset: run through ctest, or source the env file scripts/pg-cluster.sh start writes');

let predrop = null;
let workdir = null;
const transcripts = {};

function startPredrop() {
  const out = execFileSync(path.join(support, 'start-predrop.sh'), [workdir],
    { encoding: 'utf8', env: { ...process.env, PREDROP_OWNER_PID: String(process.pid) } });
  const kv = Object.fromEntries(out.trim().split('\n').map((l) => l.split(/=(.*)/s).slice(0, 2)));
  return { port: Number(kv.PREDROP_PORT), pid: Number(kv.PREDROP_PID), log: kv.PREDROP_LOG };
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function recreateDb() {
  const c = new pg.Client({ host: HOST, port: DIRECT_PORT, user: USER, database: 'postgres' });
  await c.connect();
  await c.query('SET client_min_messages = warning');
  await c.query(`DROP DATABASE IF EXISTS ${DB} WITH (FORCE)`);
  await c.query(`CREATE DATABASE ${DB} TEMPLATE template0`);
  await c.end();
}

const errFields = (e) => ({
  code: e.code, severity: e.severity, message: e.message, detail: e.detail, hint: e.hint,
  position: e.position, schema: e.schema, table: e.table, column: e.column, constraint: e.constraint,
});

function describeValue(v) {
  if (v instanceof Date) return `Date(${v.toISOString()})`;
  if (Buffer.isBuffer(v)) return `Buffer(${v.toString('hex')})`;
  return v;
}
const describeRows = (rows) => rows.map((r) => (Array.isArray(r) ? r.map(describeValue)
  : Object.fromEntries(Object.entries(r).map(([k, v]) => [k, describeValue(v)]))));

async function scenario(port) {
  const t = [];
  const log = (...a) => t.push(JSON.stringify(a));
  const checks = [];
  const check = (ok, what) => { checks.push([ok, what]); log(ok ? 'check ok' : 'CHECK FAILED', what); };
  const cfg = { host: HOST, port, user: USER, database: DB, application_name: 'node-pg',
    connectionTimeoutMillis: 10000, query_timeout: 60000 };
  await recreateDb();

  const c = new pg.Client(cfg);
  const notices = [];
  c.on('notice', (n) => notices.push([n.severity, n.code, n.message]));
  await c.connect();
  const pidRow = await c.query('SELECT pg_backend_pid() AS pid');
  check(pidRow.rows[0].pid === c.processID, 'client.processID equals pg_backend_pid()');

  // Plain queries and types.
  let r = await c.query(`SELECT 1::int AS i, 2::bigint AS big, 1.50::numeric AS n, 'ünï ☃'::text AS s,
      '2024-02-29 12:34:56.789+00'::timestamptz AS ts, '{"a":[1,null]}'::jsonb AS j, '\\x00ff'::bytea AS b,
      ARRAY[1,2,NULL]::int[] AS arr, true AS flag, NULL::text AS nothing, interval '1 day 2 hours' AS iv`);
  log('types', r.command, r.rowCount, r.fields.map((f) => [f.name, f.dataTypeID]), describeRows(r.rows));
  // Multi-statement simple query: one result per statement.
  r = await c.query('SELECT 1 AS a; SELECT 2 AS b; CREATE TABLE items (id serial PRIMARY KEY, name text UNIQUE, qty int CHECK (qty >= 0))');
  log('multi', r.map((x) => [x.command, x.rows]));

  // Parameterised and prepared (named) statements, rowMode array.
  for (let i = 0; i < 50; i++) await c.query('INSERT INTO items (name, qty) VALUES ($1, $2)', [`item ${i}`, i]);
  r = await c.query('SELECT id, name, qty FROM items WHERE qty > $1 AND name LIKE $2 ORDER BY id', [45, 'item%']);
  log('params', describeRows(r.rows));
  r = await c.query({ text: 'SELECT $1::int + $2::int AS s, $3::text AS t, $4::jsonb AS j', values: [40, 2, null, { k: 'v' }] });
  log('typed params', describeRows(r.rows));
  for (const v of [1, 2, 3]) {
    r = await c.query({ name: 'by_qty', text: 'SELECT name FROM items WHERE qty = $1', values: [v] });
    log('named prepared', v, r.rows);
  }
  r = await c.query({ text: 'SELECT id, name FROM items ORDER BY id LIMIT 3', rowMode: 'array' });
  log('rowMode array', r.rows);
  r = await c.query('SELECT count(*) AS n, md5(string_agg(md5(g::text), \'\')) AS h FROM generate_series(1, 50000) g');
  log('aggregate', r.rows);
  r = await c.query('SELECT g, repeat(\'x\', 100) AS pad FROM generate_series(1, 30000) g');
  log('big result', r.rowCount, createHash('md5').update(r.rows.map((x) => x.g + x.pad).join()).digest('hex'));

  // Transactions.
  await c.query('BEGIN');
  await c.query('INSERT INTO items (name, qty) VALUES ($1, $2)', ['in tx', 1]);
  await c.query('ROLLBACK');
  log('rolled back', (await c.query("SELECT count(*)::int AS n FROM items WHERE name = 'in tx'")).rows);
  await c.query('BEGIN');
  await c.query('INSERT INTO items (name, qty) VALUES ($1, $2)', ['committed', 1]);
  try {
    await c.query('INSERT INTO items (name, qty) VALUES ($1, $2)', ['item 1', 1]);
  } catch (e) {
    log('error in tx', errFields(e));
  }
  try {
    await c.query('SELECT 1');
  } catch (e) {
    log('aborted tx', errFields(e));
  }
  await c.query('ROLLBACK');
  await c.query('BEGIN');
  await c.query('SAVEPOINT s');
  try { await c.query('INSERT INTO items (name, qty) VALUES ($1, $2)', ['neg', -1]); } catch (e) { log('check violation', errFields(e)); }
  await c.query('ROLLBACK TO SAVEPOINT s');
  await c.query('INSERT INTO items (name, qty) VALUES ($1, $2)', ['after savepoint', 5]);
  await c.query('COMMIT');
  log('after savepoint', (await c.query("SELECT name FROM items WHERE name IN ('committed', 'after savepoint')")).rows);

  // Errors outside transactions.
  for (const [sql, vals] of [['SELEC 1'], ['SELECT * FROM nope'], ['SELECT $1::int', ['x']], ['SELECT 1/0'],
    ['INSERT INTO items (name) VALUES (NULL), (NULL), ($1)', ['item 2']]]) {
    try {
      await c.query(sql, vals);
      log('no error?', sql);
    } catch (e) {
      log('error', sql, errFields(e));
    }
  }
  log('still usable', (await c.query('SELECT 42 AS x')).rows);

  // Notices.
  await c.query("DO $$ BEGIN RAISE NOTICE 'node notice %', 1; RAISE WARNING 'node warning'; END $$");
  await c.query('DROP TABLE IF EXISTS not_there');
  await new Promise((res) => setImmediate(res));
  log('notices', notices);

  // LISTEN/NOTIFY between two clients.
  const a = new pg.Client(cfg);
  const b = new pg.Client(cfg);
  await a.connect();
  await b.connect();
  const got = [];
  const done = new Promise((resolve) => {
    a.on('notification', (n) => {
      got.push([n.channel, n.payload]);
      check(n.processId === b.processID, 'notification processId is the sender\'s backend PID');
      if (got.length === 3) resolve();
    });
  });
  await a.query('LISTEN node_chan');
  await a.query('LISTEN "Other Chan"');
  await b.query("NOTIFY node_chan, 'hello node'");
  await b.query('BEGIN');
  await b.query("SELECT pg_notify('Other Chan', $1)", ['param payload ☃']);
  await b.query('NOTIFY node_chan');
  await b.query('COMMIT');
  let timer;
  await Promise.race([done, new Promise((res) => { timer = setTimeout(res, 5000); })]);
  clearTimeout(timer);
  log('notifications', got);
  await a.end();
  await b.end();
  await c.end();

  // A pool with concurrent queries.
  const pool = new pg.Pool({ ...cfg, max: 5 });
  const results = await Promise.all(Array.from({ length: 40 }, (_, i) => pool.query('SELECT $1::int * 2 AS d, pg_sleep(0.01)', [i])));
  log('pool', results.map((x) => x.rows[0].d).reduce((s, v) => s + v, 0));
  await pool.end();

  // Password authentication implemented by node-postgres itself (SCRAM in JS, md5).
  for (const [user, password] of [['scram_user', 'scram-secret'], ['scram_user', 'bad'], ['md5_user', 'md5-secret'], ['md5_user', 'bad']]) {
    const x = new pg.Client({ ...cfg, user, password });
    try {
      await x.connect();
      log('auth', user, 'ok', (await x.query('SELECT current_user AS u')).rows);
      await x.end();
    } catch (e) {
      log('auth', user, 'failed', e.code, e.severity, e.message);
    }
  }
  return { lines: t, checks };
}

before(async () => {
  workdir = mkdtempSync(path.join(process.env.PREDROP_TEST_WORKDIR || '/tmp', 'clients-node.'));
  predrop = startPredrop();
});

after(() => {
  if (predrop) execFileSync(path.join(support, 'stop-predrop.sh'), [String(predrop.pid)]);
});

test('direct run (validates the scenario itself)', async () => {
  transcripts.direct = await scenario(DIRECT_PORT);
  writeFileSync(path.join(workdir, 'direct.txt'), transcripts.direct.lines.join('\n') + '\n');
  for (const [ok, what] of transcripts.direct.checks) assert.ok(ok, what);
});

test('through predrop', async () => {
  transcripts.predrop = await scenario(predrop.port);
  writeFileSync(path.join(workdir, 'predrop.txt'), transcripts.predrop.lines.join('\n') + '\n');
  for (const [ok, what] of transcripts.predrop.checks) assert.ok(ok, what);
  assert.ok(alive(predrop.pid), 'predrop is still running');
});

test('transcripts identical direct vs through predrop', () => {
  assert.ok(transcripts.direct && transcripts.predrop, 'both runs completed');
  assert.deepEqual(transcripts.predrop.lines, transcripts.direct.lines);
});

// node-postgres's own client/quick-disconnect-tests.js, 20 times: connect, then end at once. The
// Terminate often leaves before the startup packet; the server reads it as a bad length and closes
// without a word, so the client ends quietly. An ErrorResponse from predrop there made 16 of 20 throw.
async function quickDisconnects(port, runs) {
  const failures = [];
  for (let i = 0; i < runs; i++) {
    const c = new pg.Client({ host: HOST, port, user: USER, database: DB });
    c.on('error', (e) => failures.push(`error event: ${e.message}`));
    // As the original: neither call is waited on (connect's promise may never settle once ended).
    c.connect().catch((e) => failures.push(`connect: ${e.message}`));
    const ended = c.end().catch((e) => failures.push(`end: ${e.message}`));
    await Promise.race([ended, new Promise((r) => setTimeout(r, 2000))]);
  }
  await new Promise((r) => setTimeout(r, 300));   // late 'error' events
  return failures;
}

test('quick disconnects: as many fail through predrop as direct (none)', async () => {
  const direct = await quickDisconnects(DIRECT_PORT, 20);
  const via = await quickDisconnects(predrop.port, 20);
  assert.deepEqual(via, direct);
});
