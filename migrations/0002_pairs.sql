-- predrop store, version 2: before/after pairs.
-- An "after" snapshot (reason post_create, post_alter or post_analyze) names the "before" it
-- completes in pair_of (pre_drop of the same schema and name for a recreate, a snapshot of the
-- same table OID for an ALTER), so a pair is one join:
--   SELECT … FROM {{store_table}} b JOIN {{store_table}} a ON a.pair_of = b.id
-- No foreign key: a before may be deleted by retention while its after is kept, and the
-- reference application's rows never carry the column.
ALTER TABLE {{store_table}} ADD COLUMN IF NOT EXISTS pair_of uuid;
CREATE INDEX IF NOT EXISTS {{ix:pair_of}} ON {{store_table}} (pair_of) WHERE pair_of IS NOT NULL;
-- Pairing looks for the newest after of an OID (ALTER); the newest of a name (recreate) uses the
-- (schema_name, table_name, captured_at) index.
CREATE INDEX IF NOT EXISTS {{ix:after_oid}} ON {{store_table}} (database_name, table_oid, captured_at)
  WHERE reason IN ('post_create', 'post_alter');
