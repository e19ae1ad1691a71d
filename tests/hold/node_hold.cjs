// node-postgres (pg, from tests/clients/node/node_modules via NODE_PATH) through predrop:
//   node node_hold.cjs PORT DATABASE
// 1. simple protocol: DROP TABLE nd_simple
// 2. extended protocol (queryMode 'extended'): DROP TABLE nd_ext
// 3. a named prepared statement: DROP TABLE nd_named
// 4. a transaction: BEGIN; DROP TABLE nd_rb; ROLLBACK
// 5. a pool of 4 clients dropping nd_pool_0..7 concurrently
// Prints "ok: ..." per step; exits 1 on any error.
const { Client, Pool } = require('pg');
const [port, database] = process.argv.slice(2);
const cfg = { host: '127.0.0.1', port: Number(port), user: 'postgres', database, application_name: 'hold-node' };

async function main() {
  const c = new Client(cfg);
  await c.connect();
  let r = await c.query('DROP TABLE nd_simple');
  console.log('ok: simple DROP ->', r.command);
  r = await c.query({ text: 'DROP TABLE nd_ext', queryMode: 'extended' });
  console.log('ok: extended DROP ->', r.command);
  r = await c.query({ name: 'drop-named', text: 'DROP TABLE nd_named' });
  console.log('ok: named prepared DROP ->', r.command);
  await c.query('BEGIN');
  await c.query('DROP TABLE nd_rb');
  await c.query('ROLLBACK');
  console.log('ok: BEGIN; DROP TABLE nd_rb; ROLLBACK');
  r = await c.query('SELECT 1 AS one');
  if (r.rows[0].one !== 1) throw new Error('session unusable');
  await c.end();
  const pool = new Pool({ ...cfg, max: 4 });
  await Promise.all([...Array(8).keys()].map((i) => pool.query(`DROP TABLE nd_pool_${i}`)));
  console.log('ok: pool dropped nd_pool_0..7');
  await pool.end();
}

main().catch((e) => {
  console.log('FAIL:', e.code || '', e.message);
  process.exit(1);
});
