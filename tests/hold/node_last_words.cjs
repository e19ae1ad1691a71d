// node-postgres (pg, from tests/clients/node/node_modules via NODE_PATH) when the server ends the session:
//   node node_last_words.cjs PORT ADMIN_PORT DATABASE
// PORT is the server direct or predrop; ADMIN_PORT the server direct, for pg_terminate_backend.
// Scenarios: the session idle when terminated (then a query), busy in pg_sleep when terminated, and
// ended by idle_session_timeout. Prints one JSON line per scenario: every 'error' and 'end' the
// client emitted and how the query ended (class, code, severity, message), for comparison direct
// vs through predrop.
const { Client } = require('pg');
const [port, adminPort, database] = process.argv.slice(2);
const cfg = { host: '127.0.0.1', user: 'postgres', database };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const describe = (e) => [e.constructor.name, e.code || null, e.severity || null, e.message];

async function scenario(name) {
  const c = new Client({ ...cfg, port: Number(port) });
  const events = [];
  c.on('error', (e) => events.push(['error', ...describe(e)]));
  c.on('end', () => events.push(['end']));
  await c.connect();
  const pid = (await c.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
  const admin = new Client({ ...cfg, port: Number(adminPort) });
  await admin.connect();
  const settle = (q) => q.then(() => ['query resolved'], (e) => ['query rejected', ...describe(e)]);
  let outcome;
  if (name === 'busy') {
    const q = settle(c.query('SELECT pg_sleep(30)'));
    for (let i = 0; i < 100; i++) {
      const r = await admin.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = $1 AND state = 'active'", [pid]);
      if (r.rows[0].n === 1) break;
      await sleep(50);
    }
    await admin.query('SELECT pg_terminate_backend($1)', [pid]);
    outcome = await q;
  } else {
    if (name === 'idle') await admin.query('SELECT pg_terminate_backend($1)', [pid]);
    else await c.query("SET idle_session_timeout = '300ms'");
    await sleep(1200);
    outcome = await settle(c.query('SELECT 1'));
  }
  await sleep(300);
  events.push(outcome);
  await admin.end();
  console.log(JSON.stringify([name, events]));
}

(async () => {
  for (const name of ['idle', 'busy', 'idle_session_timeout']) await scenario(name);
})().catch((e) => {
  console.log('FAIL:', e.code || '', e.message);
  process.exit(1);
});
