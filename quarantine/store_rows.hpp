// The store's rows of quarantined tables (predrop.quarantine, migrations/0003_quarantine.sql): the
// INSERTs that record, mark and yield them, written from the comments the move leaves
// (quarantine/move_sql.hpp). The move is SQL run in the client's database; these run in the store.
#pragma once

#include <string>
#include <string_view>

namespace predrop::quarantine {

// INSERT of the store rows of tables an outcome check found quarantined; nothing for a partition's
// comment (its tree's row is the quarantine's). A held row already there takes this DROP's ids when
// it has none (the purger wrote it) or an earlier DROP's: of two DROPs of one table that both found
// it quarantined (only where its comment names no hold, or the same hold in two transactions of a
// session, the first rolled back; a DROP the server refused, or whose move the comment says is
// another hold's, is not_dropped before this), the later one's move is the one that stood,
// whichever outcome check comes first. The
// earlier DROP's ledger row in events_table, and the snapshot it names in snapshots_table (both
// already quoted), then say not_dropped. Parameters, arrays in step,
// one element a table: $1 text[] database_name, $2 jsonb[] detail, $3 text[] quarantine_schema, $4
// text[] quarantine_table, $5 bigint[] bytes, $6 uuid[] snapshot_id, $7 uuid[] event_id, $8 bigint[]
// retention seconds, $9 text[] application_name, $10 text[] client_addr; one element a quarantine.
std::string record_each_sql(std::string_view store_table, std::string_view snapshots_table,
                            std::string_view events_table);
// The same for many tables in one statement: $1 text[] databases, $2 jsonb[] details, $4 text[]
// quarantine tables, $5 bigint[] bytes, in step; $6, $7, $9 and $10 NULL. A round of the purger
// writes every held table's row in it (one statement a row cost the server more than the DROPs).
std::string record_many_sql(std::string_view store_table);
// Tables' rows set to state $11 with state_reason from $12 (text[], in step with record_many_sql's
// arrays: purged, restored) where they are held, written so where they are missing; a row already
// purged or restored stays as it is.
std::string mark_many_sql(std::string_view store_table);

// The same row for a table a yield purged (issue 22): written 'purged' with state_reason $11 ("yielded
// to DROP ROLE r"), or a held row already there marked so.
std::string yielded_sql(std::string_view store_table);

}  // namespace predrop::quarantine
