// node-postgres (pg, from tests/clients/node/node_modules via NODE_PATH) for test_wire_node.py:
//   node wire_node.cjs HOST PORT DATABASE
// Runs the same steps on whatever server it is given and prints, as one JSON array, what the client
// saw of each: command and rowCount, or the error's fields, and the notices that came with it.
const { Client } = require('pg');
const [host, port, database] = process.argv.slice(2);
const ERROR_FIELDS = ['severity', 'code', 'message', 'detail', 'hint', 'position', 'internalPosition',
  'internalQuery', 'where', 'schema', 'table', 'column', 'dataType', 'constraint', 'file', 'line', 'routine'];

function fields(e) {
  const o = {};
  for (const k of ERROR_FIELDS) if (e[k] !== undefined) o[k] = e[k];
  return o;
}

async function main() {
  const c = new Client({ host, port: Number(port), user: 'postgres', database, application_name: 'wire_node' });
  let notices = [];
  c.on('notice', (n) => notices.push(fields(n)));
  await c.connect();
  const seen = [];
  async function step(label, q) {
    try {
      const r = await c.query(q);
      const rs = Array.isArray(r) ? r : [r];
      seen.push({ label, ok: rs.map((x) => [x.command, x.rowCount, x.rows]), notices });
    } catch (e) {
      seen.push({ label, error: fields(e), notices });
    }
    notices = [];
  }
  await step('simple DROP', 'DROP TABLE nd_simple');
  await step('extended DROP', { text: 'DROP TABLE nd_ext', queryMode: 'extended' });
  await step('extended IF EXISTS missing', { text: 'DROP TABLE IF EXISTS nd_missing', queryMode: 'extended' });
  await step('extended missing', { text: 'DROP TABLE nd_missing', queryMode: 'extended' });
  await step('extended 2BP01', { text: 'DROP TABLE nd_dep', queryMode: 'extended' });
  await step('extended 42809', { text: 'DROP TABLE nd_dep_v', queryMode: 'extended' });
  for (let i = 0; i < 3; i++) {
    await step('create for named #' + i, 'CREATE TABLE nd_named (a int)');
    await step('named prepared DROP #' + i, { name: 'drop-named', text: 'DROP TABLE nd_named' });
  }
  await step('named prepared DROP, no table', { name: 'drop-named', text: 'DROP TABLE nd_named' });
  await step('named CASCADE', { name: 'drop-casc', text: 'DROP TABLE nd_casc CASCADE' });
  await step('extended DROP TABLE a, b', { text: 'DROP TABLE nd_a, nd_b', queryMode: 'extended' });
  await step('extended DROP SCHEMA CASCADE', { text: 'DROP SCHEMA nd_s CASCADE', queryMode: 'extended' });
  await step('multi-statement', 'CREATE TABLE nd_new (); DROP TABLE nd_multi; SELECT 1 AS one');
  await step('BEGIN', 'BEGIN');
  await step('DROP in a transaction', { text: 'DROP TABLE nd_rb', queryMode: 'extended' });
  await step('ROLLBACK', 'ROLLBACK');
  await step('back', "SELECT to_regclass('nd_rb') IS NOT NULL AS back");
  await c.end();
  console.log(JSON.stringify(seen));
}

main().catch((e) => {
  console.log('FAIL:', e.code || '', e.message);
  process.exit(1);
});
