-- predrop store, version 4: a recreate's pairing reads the newest after of a name with one index
-- probe. Without it the generic plan of the write and of the copied afters fell back on the
-- after_oid index by database alone and read every after of the database (issue 21: 40 ms a
-- statement after 5,000 afters), a cost that grew with the store.
CREATE INDEX IF NOT EXISTS {{ix:after_name}} ON {{store_table}} (database_name, schema_name, table_name, captured_at)
  WHERE reason IN ('post_create', 'post_alter');
-- A ledger row is updated once after its insert (its outcome and hold_ms, neither indexed): room
-- on its page lets that update stay on the page (HOT) instead of touching the four indexes.
ALTER TABLE predrop.drop_events SET (fillfactor = 80);
