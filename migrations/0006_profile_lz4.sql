-- predrop store, version 6: columns_profile is compressed with lz4 where the server offers it
-- (PostgreSQL 14 and later built with lz4, as Debian's and the managed services' are). An analysed
-- 20-column table's profile is about 9 KB of JSON; stored, pglz made it 4,490 bytes and lz4 makes
-- it about 4,060 (issue 25, spec 023 SC-006: about 4 KB a snapshot). Only values written from now
-- on; those already stored stay as they are, and readers see no difference. A server without lz4,
-- or a store table predrop does not own, keeps pglz and says so: the store works either way.
DO $$
BEGIN
  ALTER TABLE {{store_table}} ALTER COLUMN columns_profile SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported OR insufficient_privilege OR invalid_parameter_value THEN
  RAISE NOTICE 'predrop store: columns_profile keeps its compression (%)', SQLERRM;
END$$;
