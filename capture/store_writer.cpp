#include "capture/store_writer.hpp"

#include <openssl/rand.h>

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <iterator>
#include <random>

#include "quarantine/move_sql.hpp"
#include "quarantine/store_rows.hpp"

namespace predrop::capture {

namespace {

// The before an after completes (migrations/0002_pairs.sql), one rule for the write and the copy:
// the one the proxy named (the hold of the ALTER itself, the DROP before a recreate) if the store
// has it; else for an ALTER the oldest snapshot of the same table OID since its last after, for a
// recreate the oldest of the same name (another OID) since the last after of that name, a hold's
// before preferred to a baseline row. Filled in by pair_of_sql(): REASON, HINT, DB, OID, SCHEMA,
// TABLE name the after's, ALSO narrows the befores. The newest after is read as ORDER BY captured_at
// DESC LIMIT 1: only an index whose equality prefix leaves captured_at in order serves that without
// a sort (after_oid, after_name of migrations 0002 and 0004), so the generic plan reads one entry
// whatever the store's statistics say (a max() let it pick after_oid by database alone).
constexpr const char* kPairOfSql = R"SQL(CASE
    WHEN @HINT@ IS NOT NULL AND EXISTS (SELECT 1 FROM @STORE@ h WHERE h.id = @HINT@) THEN @HINT@
    WHEN @REASON@ = 'post_alter' THEN (
      SELECT b.id FROM @STORE@ b
       WHERE b.database_name = @DB@ AND b.table_oid = @OID@ AND left(b.reason, 5) <> 'post_' AND @ALSO@
         AND b.captured_at > coalesce((SELECT a.captured_at FROM @STORE@ a
                                        WHERE a.database_name = @DB@ AND a.table_oid = @OID@
                                          AND a.reason IN ('post_create', 'post_alter') AND a.captured_at < @AT@
                                        ORDER BY a.captured_at DESC LIMIT 1), '-infinity')
       ORDER BY b.reason = 'baseline', b.captured_at LIMIT 1)
    WHEN @REASON@ = 'post_create' THEN (
      SELECT b.id FROM @STORE@ b
       WHERE b.database_name = @DB@ AND b.schema_name = @SCHEMA@ AND b.table_name = @TABLE@
         AND left(b.reason, 5) <> 'post_' AND b.table_oid IS DISTINCT FROM @OID@ AND @ALSO@
         AND b.captured_at > coalesce((SELECT a.captured_at FROM @STORE@ a
                                        WHERE a.database_name = @DB@ AND a.schema_name = @SCHEMA@
                                          AND a.table_name = @TABLE@
                                          AND a.reason IN ('post_create', 'post_alter') AND a.captured_at < @AT@
                                        ORDER BY a.captured_at DESC LIMIT 1), '-infinity')
       ORDER BY b.reason = 'baseline', b.captured_at LIMIT 1)
  END)SQL";

// The write is put together from parts (build_store_sql): its rows (i) and their dedup (d); for a
// write with afters, their pairing (dt, p, sup); the snapshot rows (w); their announcement, the
// ledger rows and the commit's durability (n, e, sc) and the answer, a row per row by ord.
// Every parameter is a per-row array but $21 (the dedup window) and $24 (the actor): the rows of
// several requests go in one statement (group commit, capture/snapshot_pipeline.cpp).
constexpr const char* kWriteRowsSql = R"SQL(
WITH i AS (
  SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::bigint[], $6::text[], $7::int[],
                       $8::bigint[], $9::text[], $10::text[], $11::bool[], $12::text[], $13::text[], $14::int[],
                       $15::text[], $16::text[], $17::text[], $18::text[], $19::bool[], $20::text[],
                       $33::uuid[], $22::text[], $23::text[], $25::text[], $26::text[], $27::text[], $28::text[],
                       $29::text[], $30::float8[], $31::text[], $32::uuid[], $35::uuid[])
    WITH ORDINALITY AS i(sid, eid, schema_name, table_name, table_oid, pre_outcome, column_count,
                         row_count_estimate, schema_hash, columns_profile, stats_available, extra,
                         resource_identity, version, parser_version, normalization_version,
                         layout_profile, header_quality, is_truncated, error, pair_hint, db, reason,
                         statement_kind, statement, session_user_name, application_name, client_addr,
                         capture_ms, fingerprint, profile_of, dated_before, ord)
), d AS (
  -- de-duplication window: the same (database, schema, table, hash) captured within $21 seconds;
  -- rows the reference application wrote (no database_name) count too. Befores only, on both
  -- sides: an after never stands in for a before (its pair would be an after).
  SELECT DISTINCT ON (i.ord) i.ord, s.id
    FROM i JOIN @STORE@ s ON s.schema_name = i.schema_name AND s.table_name = i.table_name
                         AND s.schema_hash = i.schema_hash
   WHERE i.pre_outcome = 'capture' AND $21::int > 0 AND left(i.reason, 5) <> 'post_' AND left(s.reason, 5) <> 'post_'
     AND (s.database_name = i.db OR s.database_name IS NULL)
     AND s.captured_at > now() - make_interval(secs => $21::int)
   ORDER BY i.ord, s.captured_at DESC
))SQL";

constexpr const char* kWritePairingSql = R"SQL(, dt AS (
  -- An after that read its table while a later statement's before of it was written (a DROP held
  -- while the after ran: WriteRow::dated_before) is of the time before that before: it is dated
  -- just before it, as a copied after is, and pairs only with what came before it.
  -- Looked up by id per row (a join could be planned as a scan of the store while it is small,
  -- and the plan is kept).
  SELECT i.ord, (SELECT b.captured_at FROM @STORE@ b WHERE b.id = i.dated_before) AS captured_at
    FROM i WHERE i.dated_before IS NOT NULL
), p AS (
  -- The before an after completes (kPairOfSql); a post_analyze joins the pair of the after whose
  -- profile it completes (profile_of).
  SELECT i.ord, CASE
    WHEN i.reason = 'post_analyze' THEN (SELECT s.pair_of FROM @STORE@ s WHERE s.id = i.profile_of)
    ELSE @PAIR_OF:i.reason|i.pair_hint|i.db|i.table_oid|i.schema_name|i.table_name|b.captured_at < coalesce((SELECT dt.captured_at FROM dt WHERE dt.ord = i.ord), 'infinity')|coalesce((SELECT dt.captured_at FROM dt WHERE dt.ord = i.ord), 'infinity')@
  END AS pair_of
    FROM i WHERE i.pre_outcome = 'capture' AND left(i.reason, 5) = 'post_'
), sup AS (
  -- A recreate whose after ran late (afters yield to holds): if the table it names was dropped
  -- again meanwhile through predrop, what the catalog shows now is a later table. The DROP's before
  -- holds the shape this after is about, and is used instead (extra says so): the before written
  -- while the after ran (dated_before) when it is of another table than the one read, else the
  -- later DROP's before (the first of that name since the pair's before, of another OID).
  SELECT i.ord, b.*
    FROM i CROSS JOIN LATERAL (
     (SELECT s.id, s.table_oid, s.column_count, s.row_count_estimate, s.schema_hash, s.columns_profile,
             s.stats_available, s.resource_identity, s.version, s.parser_version, s.normalization_version,
             s.layout_profile, s.header_quality, s.is_truncated
        FROM @STORE@ s
       WHERE s.id = i.dated_before AND s.table_oid IS DISTINCT FROM i.table_oid)
     UNION ALL
     (SELECT s.id, s.table_oid, s.column_count, s.row_count_estimate, s.schema_hash, s.columns_profile,
             s.stats_available, s.resource_identity, s.version, s.parser_version, s.normalization_version,
             s.layout_profile, s.header_quality, s.is_truncated
        FROM p JOIN @STORE@ pb ON pb.id = p.pair_of
             JOIN @STORE@ s ON s.database_name = i.db AND s.schema_name = i.schema_name
                           AND s.table_name = i.table_name AND s.reason = 'pre_drop'
                           AND s.captured_at > pb.captured_at AND s.table_oid IS DISTINCT FROM pb.table_oid
       WHERE p.ord = i.ord
       ORDER BY s.captured_at LIMIT 1)
     LIMIT 1) b
   WHERE i.reason = 'post_create' AND i.pre_outcome = 'capture'
))SQL";

constexpr const char* kWriteSnapshotsSql = R"SQL(, w AS (
  INSERT INTO @STORE@ (id, @SNAPSHOT_COLUMNS@, statement_kind, statement, session_user_name, application_name,
                       client_addr, capture_ms, pair_of, captured_at)
  SELECT i.sid, i.schema_name, i.table_name,
         CASE WHEN sup.id IS NULL THEN i.resource_identity ELSE sup.resource_identity END,
         CASE WHEN sup.id IS NULL THEN i.version ELSE sup.version END, i.reason, $24,
         CASE WHEN sup.id IS NULL THEN i.column_count ELSE sup.column_count END,
         CASE WHEN sup.id IS NULL THEN i.row_count_estimate ELSE sup.row_count_estimate END,
         CASE WHEN sup.id IS NULL THEN i.schema_hash ELSE sup.schema_hash END,
         CASE WHEN sup.id IS NULL THEN i.columns_profile::jsonb ELSE sup.columns_profile END,
         CASE WHEN sup.id IS NULL THEN i.stats_available ELSE sup.stats_available END,
         CASE WHEN sup.id IS NOT NULL THEN jsonb_build_object('shape_from', sup.id)
              WHEN i.reason = 'post_analyze' THEN coalesce(i.extra::jsonb, '{}') || jsonb_build_object('profile_of', i.profile_of)
              ELSE i.extra::jsonb END,
         CASE WHEN sup.id IS NULL THEN i.parser_version ELSE sup.parser_version END,
         CASE WHEN sup.id IS NULL THEN i.normalization_version ELSE sup.normalization_version END,
         CASE WHEN sup.id IS NULL THEN i.layout_profile ELSE sup.layout_profile END,
         CASE WHEN sup.id IS NULL THEN i.header_quality ELSE sup.header_quality END,
         CASE WHEN sup.id IS NULL THEN i.is_truncated ELSE sup.is_truncated END, i.db,
         CASE WHEN sup.id IS NULL THEN i.table_oid ELSE sup.table_oid END, i.statement_kind, i.statement,
         i.session_user_name, i.application_name, i.client_addr, i.capture_ms,
         p.pair_of, least(now(), (SELECT dt.captured_at - interval '1 microsecond' FROM dt WHERE dt.ord = i.ord))
    FROM i LEFT JOIN p ON p.ord = i.ord LEFT JOIN sup ON sup.ord = i.ord
   WHERE i.pre_outcome = 'capture' AND NOT EXISTS (SELECT 1 FROM d WHERE d.ord = i.ord)
  RETURNING id, schema_name, table_name, schema_hash, pair_of, captured_at, table_oid, database_name, reason
))SQL";

// A write of befores only (every hold's, issue 21): what the afters' parts would compute for them
// is known (no pair, no later table's shape, dated now), and a plan without those parts starts and
// runs in less of the server's time, on the hold's path. Its rows and answer are the full write's.
constexpr const char* kWriteBeforesSql = R"SQL(, w AS (
  INSERT INTO @STORE@ (id, @SNAPSHOT_COLUMNS@, statement_kind, statement, session_user_name, application_name,
                       client_addr, capture_ms, captured_at)
  SELECT i.sid, i.schema_name, i.table_name, i.resource_identity, i.version, i.reason, $24, i.column_count,
         i.row_count_estimate, i.schema_hash, i.columns_profile::jsonb, i.stats_available, i.extra::jsonb,
         i.parser_version, i.normalization_version, i.layout_profile, i.header_quality, i.is_truncated, i.db,
         i.table_oid, i.statement_kind, i.statement, i.session_user_name, i.application_name, i.client_addr,
         i.capture_ms, now()
    FROM i
   WHERE i.pre_outcome = 'capture' AND NOT EXISTS (SELECT 1 FROM d WHERE d.ord = i.ord)
  RETURNING id, schema_name, table_name, schema_hash, pair_of, captured_at, table_oid, database_name, reason
))SQL";

constexpr const char* kWriteEndSql = R"SQL(, n AS (
  -- Each written row's announcement, sent once this write has committed (capture/announcer.hpp).
  SELECT w.id, @PAYLOAD@ AS payload FROM w
), e AS (
  INSERT INTO @EVENTS@ (id, outcome, snapshot_id, error, database_name, schema_name, table_name, table_oid,
                        statement_kind, statement, fingerprint, session_user_name, application_name, client_addr,
                        reason, actor, capture_ms)
  SELECT i.eid,
         CASE WHEN w.id IS NOT NULL THEN 'written' WHEN d.id IS NOT NULL THEN 'deduplicated' ELSE i.pre_outcome END,
         coalesce(w.id, d.id), i.error, i.db, i.schema_name, i.table_name, i.table_oid, i.statement_kind, i.statement,
         i.fingerprint, i.session_user_name, i.application_name, i.client_addr, i.reason, $24, i.capture_ms
    FROM i LEFT JOIN w ON w.id = i.sid LEFT JOIN d ON d.ord = i.ord
   -- The ledger records intercepted statements. An after gets a row only when it failed: a
   -- written one is its own record, and a table gone before its after is the DROP's to record.
   WHERE left(i.reason, 5) <> 'post_' OR (w.id IS NULL AND i.pre_outcome NOT IN ('capture', 'table_missing'))
  RETURNING id
), sc AS (
  -- $34 names the server the tables were read on (capture_query's last column). When the store is
  -- that very server, this commit need not wait for its WAL flush: the DROP it precedes commits
  -- later in the same WAL, and its flush carries this commit with it, so a crash can lose this
  -- snapshot only together with the DROP (issue 21: one fsync less on every hold).
  SELECT set_config('synchronous_commit', 'off', true)
   WHERE $34::text = pg_postmaster_start_time()::text || '/' || coalesce(inet_server_port(), 0)::text
)
SELECT i.ord, w.id IS NOT NULL, d.id::text, (SELECT count(*) FROM e), (SELECT count(*) FROM n),
       w.table_oid IS DISTINCT FROM i.table_oid, (SELECT count(*) FROM sc), (SELECT n.payload FROM n WHERE n.id = w.id)
  FROM i LEFT JOIN w ON w.id = i.sid LEFT JOIN d ON d.ord = i.ord
 ORDER BY i.ord
)SQL";

// Afters absorbed by later holds of the same tables (capture/after_capture.cpp), gathered into one
// statement: each hold's before ($1) is its table's shape at that moment, which is what the after
// would have read. Each is copied as its after, paired as the write pairs ($3 the proxy's pair;
// never with the before it copies), and announced like every snapshot. Its captured_at is just before
// its source's, as its statement was: written later, it would read as the newest snapshot of a table
// its own DROP had ended (evidence/ages.cpp would call that table live). The copies of one statement
// do not see each other's rows: a recreate churn's afters of one table come in one window, and each
// pairs with the before just ahead of its own source, never one an earlier copy in the window
// already completes (a source between them stands for that copy). Pairing looks only at afters dated
// before the copy's own date, so a copy written after a later cycle's copy of the same table still
// pairs with its own cycle's before (capture/after_capture.cpp writes one copy statement at a time,
// but a retried one can land late).
constexpr const char* kCopyAfterSql = R"SQL(
WITH r AS (
  SELECT * FROM unnest($1::uuid[], $2::text[], $3::uuid[], $4::uuid[], $6::text[], $7::text[], $8::text[],
                       $9::text[], $10::text[])
    WITH ORDINALITY AS r(src_id, a_reason, a_hint, a_id, a_kind, a_statement, a_user, a_app, a_addr, ord)
), src AS (
  SELECT r.ord, r.a_reason, r.a_hint, r.a_id, r.a_kind, r.a_statement, r.a_user, r.a_app, r.a_addr, s.*
    FROM r JOIN @STORE@ s ON s.id = r.src_id
), p AS (
  SELECT src.ord,
         @PAIR_OF:src.a_reason|src.a_hint|src.database_name|src.table_oid|src.schema_name|src.table_name|b.id <> src.id AND b.captured_at < src.captured_at AND NOT EXISTS (SELECT 1 FROM src o WHERE o.database_name = src.database_name AND o.schema_name = src.schema_name AND o.table_name = src.table_name AND o.captured_at > b.captured_at AND o.captured_at < src.captured_at)|src.captured_at@
         AS pair_of FROM src
), w AS (
  INSERT INTO @STORE@ (id, @SNAPSHOT_COLUMNS@, statement_kind, statement, session_user_name, application_name,
                       client_addr, capture_ms, pair_of, captured_at)
  SELECT src.a_id, src.schema_name, src.table_name, src.resource_identity, src.version, src.a_reason, $5,
         src.column_count, src.row_count_estimate, src.schema_hash, src.columns_profile, src.stats_available,
         jsonb_build_object('shape_from', src.id), src.parser_version, src.normalization_version,
         src.layout_profile, src.header_quality, src.is_truncated, src.database_name, src.table_oid, src.a_kind,
         src.a_statement, src.a_user, src.a_app, src.a_addr, 0, p.pair_of, src.captured_at - interval '1 microsecond'
    FROM src JOIN p ON p.ord = src.ord
   ORDER BY src.ord
  RETURNING id, database_name, schema_name, table_name, reason, schema_hash, pair_of, captured_at
), n AS (
  -- Each copy's announcement, sent once this statement has committed (capture/announcer.hpp).
  SELECT @PAYLOAD@ AS payload, w.captured_at FROM w
)
SELECT (SELECT count(*) FROM w), (SELECT count(*) FROM n), n.payload
  FROM (VALUES (1)) AS one (x) LEFT JOIN n ON true
 ORDER BY n.captured_at
)SQL";

constexpr const char* kEventsSql = R"SQL(
INSERT INTO @EVENTS@ (id, outcome, error, schema_name, table_name, table_oid, snapshot_id, database_name,
                      statement_kind, statement, fingerprint, session_user_name, application_name, client_addr,
                      reason, actor, hold_ms, capture_ms)
SELECT i.eid, i.outcome, i.error, i.schema_name, i.table_name, i.table_oid, i.sid, $8, $9, $10, $11, $12, $13, $14,
       $15, $16, $17::float8, $18::float8
  FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::uuid[])
       AS i(eid, outcome, error, schema_name, table_name, table_oid, sid)
)SQL";

constexpr const char* kHoldSql = R"SQL(
WITH a AS (UPDATE @STORE@ SET hold_ms = $3::float8 WHERE id = ANY ($1::uuid[]) RETURNING 1),
     b AS (UPDATE @EVENTS@ SET hold_ms = $3::float8 WHERE id = ANY ($2::uuid[]) RETURNING 1)
SELECT (SELECT count(*) FROM a), (SELECT count(*) FROM b)
)SQL";

constexpr const char* kHoldEventsSql = R"SQL(
WITH b AS (UPDATE @EVENTS@ SET hold_ms = $3::float8 WHERE id = ANY ($2::uuid[]) RETURNING 1)
SELECT cardinality($1::uuid[]), (SELECT count(*) FROM b)
)SQL";

// Each row's hold_ms rides along ($5 onto the ledger row, $6 onto the snapshot it wrote; empty:
// leave it), so a hold that ends in an outcome check costs no statement of its own.
// A DROP found quarantined whose quarantine's store row names a later DROP (written before, in the
// same order: quarantine/store_rows.hpp) did not drop the table: the later one's move stood. @LATER@
// says so (outcome_quarantined); `outcome` has false there, and needs no privilege on the quarantine's
// table where no rule quarantines.
constexpr const char* kOutcomeSql = R"SQL(
WITH v AS (
  SELECT NULLIF(sid, '')::uuid AS sid, NULLIF(eid, '')::uuid AS eid, outcome, NULLIF(qid, '')::uuid AS qid,
         NULLIF(ehold, '')::float8 AS ehold, NULLIF(shold, '')::float8 AS shold, own
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bool[])
         AS u(sid, eid, outcome, qid, ehold, shold, own)
), u AS (
  SELECT sid, eid, CASE WHEN later THEN 'not_dropped' ELSE outcome END AS outcome,
         CASE WHEN later THEN NULL ELSE qid END AS qid, ehold, shold, own
    FROM (SELECT v.*, @LATER@ AS later FROM v) v
), a AS (
  -- One update a snapshot, the latest DROP's. A deduplicated DROP's row names the snapshot an
  -- earlier DROP of the same shape wrote (own false): it settles that snapshot only by dropping or
  -- quarantining its table, never undoes what the earlier DROP did.
  UPDATE @STORE@ s SET drop_outcome = u.outcome, outcome_at = now(), hold_ms = coalesce(u.shold, s.hold_ms),
         extra = CASE WHEN u.qid IS NULL THEN s.extra
                      ELSE coalesce(s.extra, '{}'::jsonb) || jsonb_build_object('quarantine_id', u.qid) END
    FROM (SELECT DISTINCT ON (sid) * FROM u WHERE sid IS NOT NULL AND (own OR outcome <> 'not_dropped')
           ORDER BY sid, eid DESC NULLS LAST) u
   WHERE s.id = u.sid RETURNING 1
), b AS (
  UPDATE @EVENTS@ e SET drop_outcome = u.outcome, outcome_at = now(), quarantine_id = u.qid,
         hold_ms = coalesce(u.ehold, e.hold_ms)
    FROM u WHERE e.id = u.eid
  RETURNING 1
), c AS (
  -- A row without its ledger id (written before ledger ids were kept): found by its snapshot.
  UPDATE @EVENTS@ e SET drop_outcome = u.outcome, outcome_at = now(), quarantine_id = u.qid
    FROM u WHERE u.eid IS NULL AND e.snapshot_id = u.sid
  RETURNING 1
)
SELECT (SELECT count(*) FROM a), (SELECT count(*) FROM b) + (SELECT count(*) FROM c)
)SQL";

using Column = std::vector<std::optional<std::string>>;

std::optional<std::string> clip(const std::optional<std::string>& s, int n) {
  if (!s) return std::nullopt;
  return clip_chars(*s, n);
}

std::optional<std::string> opt_text(const std::string& s) {
  return s.empty() ? std::nullopt : std::optional<std::string>(s);
}

std::string ms_text(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", ms);
  return buf;
}

}  // namespace

// Each @PAIR_OF:REASON|HINT|DB|OID|SCHEMA|TABLE|ALSO|AT@ in sql becomes kPairOfSql with those filled in.
static void expand_pair_of(std::string& sql) {
  for (size_t at; (at = sql.find("@PAIR_OF:")) != std::string::npos;) {
    size_t end = sql.find('@', at + 9);
    std::vector<std::string> args;
    for (size_t p = at + 9, bar; p <= end; p = bar + 1) {
      bar = std::min(sql.find('|', p), end);
      args.push_back(sql.substr(p, bar - p));
    }
    std::string frag = kPairOfSql;
    const char* names[] = {"@REASON@", "@HINT@", "@DB@", "@OID@", "@SCHEMA@", "@TABLE@", "@ALSO@", "@AT@"};
    for (size_t k = 0; k < args.size() && k < std::size(names); ++k) replace_all(frag, names[k], args[k]);
    sql.replace(at, end + 1 - at, frag);
  }
}

void expand_snapshot_sql(std::string& sql, std::string_view row) {
  replace_all(sql, "@SNAPSHOT_COLUMNS@",
              "schema_name, table_name, resource_identity, version, reason, actor, column_count, row_count_estimate, "
              "schema_hash, columns_profile, stats_available, extra, parser_version, normalization_version, "
              "layout_profile, header_quality, is_truncated, database_name, table_oid");
  const std::string r(row);
  const std::string payload = "json_build_object('id', " + r + ".id, 'database', " + r + ".database_name, 'schema', " +
                              r + ".schema_name, 'table', " + r + ".table_name, 'reason', " + r +
                              ".reason, 'schema_hash', " + r + ".schema_hash, 'pair_of', " + r +
                              ".pair_of, 'captured_at', " + r + ".captured_at)::text";
  replace_all(sql, "@NOTIFY@", "pg_notify('" + std::string(kSnapshotChannel) + "', " + payload + ")");
  replace_all(sql, "@PAYLOAD@", payload);
}

StoreSql build_store_sql(const std::string& store, const std::string& events) {
  StoreSql s{std::string(kWriteRowsSql) + kWritePairingSql + kWriteSnapshotsSql + kWriteEndSql,
             std::string(kWriteRowsSql) + kWriteBeforesSql + kWriteEndSql,
             kEventsSql, kHoldSql, kHoldEventsSql, kOutcomeSql, kCopyAfterSql,
             quarantine::record_each_sql(quarantine::kQuarantineStoreTable, store, events), kOutcomeSql};
  replace_all(s.outcome, "@LATER@", "false");
  replace_all(s.outcome_quarantined, "@LATER@",
              "(qid IS NOT NULL AND eid < (SELECT q.event_id FROM @QUARANTINE@ q WHERE q.id = v.qid))");
  expand_pair_of(s.write);
  expand_pair_of(s.copy_after);
  for (auto* sql : {&s.write, &s.write_befores, &s.events, &s.hold, &s.hold_events, &s.outcome, &s.copy_after,
                    &s.outcome_quarantined}) {
    expand_snapshot_sql(*sql, "w");
    replace_all(*sql, "@STORE@", store);
    replace_all(*sql, "@EVENTS@", events);
    replace_all(*sql, "@QUARANTINE@", quarantine::kQuarantineStoreTable);
  }
  return s;
}

Params write_params(const std::vector<WriteGroup>& groups, const CaptureConfig& cfg) {
  std::vector<Column> cols(20);
  Column hints, dbs, reasons, kinds, statements, users, apps, addrs, capture_ms, fingerprints, profile_ofs,
      dated_befores;
  for (const auto& g : groups) {
    for (const auto& r : *g.rows) {
      const CapturedTable* t = r.captured;
      const Enrichment* e = t ? &t->enrich : nullptr;
      auto bool_text = [](std::optional<bool> b) -> std::optional<std::string> {
        if (!b) return std::nullopt;
        return std::string(*b ? "t" : "f");
      };
      cols[0].push_back(opt_text(r.snapshot_id));
      cols[1].push_back(r.event_id);
      cols[2].push_back(opt_text(r.schema));
      cols[3].push_back(opt_text(r.table));
      cols[4].push_back(r.oid ? std::optional<std::string>(std::to_string(*r.oid)) : std::nullopt);
      cols[5].push_back(std::string(r.outcome ? to_string(*r.outcome) : "capture"));
      cols[6].push_back(t ? std::optional<std::string>(std::to_string(t->snap.columns.size())) : std::nullopt);
      cols[7].push_back(t && t->snap.row_count_estimate ? std::optional<std::string>(std::to_string(*t->snap.row_count_estimate))
                                                        : std::nullopt);
      cols[8].push_back(t ? std::optional<std::string>(t->snap.schema_hash) : std::nullopt);
      cols[9].push_back(t ? std::optional<std::string>(columns_profile_json(t->snap.columns)) : std::nullopt);
      cols[10].push_back(t ? bool_text(t->snap.stats_available) : std::nullopt);
      // extra stays NULL unless there is something to say, as the reference writes it.
      cols[11].push_back(t && t->snap.profile_skipped ? std::optional<std::string>(R"({"profile_skipped":"too_many_columns"})")
                                                      : std::nullopt);
      // Enrichment values wider than the reference's columns are clipped, never allowed to fail the row.
      cols[12].push_back(e ? clip(e->resource_identity, 512) : std::nullopt);
      cols[13].push_back(e && e->version ? std::optional<std::string>(std::to_string(*e->version)) : std::nullopt);
      cols[14].push_back(e ? clip(e->parser_version, 40) : std::nullopt);
      cols[15].push_back(e ? clip(e->normalization_version, 40) : std::nullopt);
      cols[16].push_back(e ? clip(e->layout_profile, 40) : std::nullopt);
      cols[17].push_back(e ? clip(e->header_quality, 20) : std::nullopt);
      cols[18].push_back(e ? bool_text(e->is_truncated) : std::nullopt);
      cols[19].push_back(opt_text(r.error));
      hints.push_back(r.captured ? opt_text(r.pair_hint) : std::nullopt);
      const StatementContext& ctx = *g.ctx;
      dbs.push_back(ctx.database);
      reasons.push_back(std::string(to_string(g.reason)));
      kinds.push_back(opt_text(ctx.statement_kind));
      statements.push_back(opt_text(ctx.statement));
      users.push_back(opt_text(ctx.session_user));
      apps.push_back(opt_text(ctx.application_name));
      addrs.push_back(opt_text(ctx.client_addr));
      capture_ms.push_back(ms_text(g.capture_ms));
      fingerprints.push_back(opt_text(ctx.fingerprint));
      profile_ofs.push_back(opt_text(g.profile_of));
      dated_befores.push_back(r.captured ? opt_text(r.dated_before) : std::nullopt);
    }
  }
  Params p;
  for (const auto& c : cols) p.push_back(pg_array_literal(c));
  p.push_back(std::to_string(cfg.dedup_window_s));   // $21
  p.push_back(pg_array_literal(dbs));                 // $22
  p.push_back(pg_array_literal(reasons));             // $23
  p.push_back(clip_chars(cfg.actor, 128));            // $24
  p.push_back(pg_array_literal(kinds));               // $25
  p.push_back(pg_array_literal(statements));          // $26
  p.push_back(pg_array_literal(users));               // $27
  p.push_back(pg_array_literal(apps));                // $28
  p.push_back(pg_array_literal(addrs));               // $29
  p.push_back(pg_array_literal(capture_ms));          // $30
  p.push_back(pg_array_literal(fingerprints));        // $31
  p.push_back(pg_array_literal(profile_ofs));         // $32
  p.push_back(pg_array_literal(hints));               // $33
  // $34: the server every group's tables were read on, when they agree.
  std::optional<std::string> server;
  for (const auto& g : groups) {
    if (g.server.empty() || (server && *server != g.server)) {
      server.reset();
      break;
    }
    server = g.server;
  }
  p.push_back(server);
  p.push_back(pg_array_literal(dated_befores));       // $35
  return p;
}

Params events_params(const std::vector<WriteRow>& rows, const StatementContext& ctx, const CaptureConfig& cfg,
                     SnapshotReason reason, std::optional<double> hold_ms, double capture_ms) {
  std::vector<Column> cols(7);
  for (const auto& r : rows) {
    cols[0].push_back(r.event_id);
    cols[1].push_back(std::string(to_string(r.outcome.value_or(SnapshotOutcome::capture_error))));
    cols[2].push_back(opt_text(r.error));
    cols[3].push_back(opt_text(r.schema));
    cols[4].push_back(opt_text(r.table));
    cols[5].push_back(r.oid ? std::optional<std::string>(std::to_string(*r.oid)) : std::nullopt);
    cols[6].push_back(std::nullopt);
  }
  Params p;
  for (const auto& c : cols) p.push_back(pg_array_literal(c));
  p.push_back(opt_text(ctx.database));
  p.push_back(opt_text(ctx.statement_kind));
  p.push_back(opt_text(ctx.statement));
  p.push_back(opt_text(ctx.fingerprint));
  p.push_back(opt_text(ctx.session_user));
  p.push_back(opt_text(ctx.application_name));
  p.push_back(opt_text(ctx.client_addr));
  p.push_back(std::string(to_string(reason)));
  p.push_back(clip_chars(cfg.actor, 128));
  p.push_back(hold_ms ? std::optional<std::string>(ms_text(*hold_ms)) : std::nullopt);
  p.push_back(ms_text(capture_ms));
  return p;
}

Params copy_after_params(const std::vector<AfterCopy>& copies, const CaptureConfig& cfg) {
  std::vector<Column> cols(9);
  for (const auto& c : copies) {
    cols[0].push_back(c.before_id);
    cols[1].push_back(std::string(to_string(c.reason)));
    cols[2].push_back(opt_text(c.pair_hint));
    cols[3].push_back(new_uuid());
    cols[4].push_back(opt_text(c.ctx.statement_kind));
    cols[5].push_back(opt_text(c.ctx.statement));
    cols[6].push_back(opt_text(c.ctx.session_user));
    cols[7].push_back(opt_text(c.ctx.application_name));
    cols[8].push_back(opt_text(c.ctx.client_addr));
  }
  Params p;
  for (size_t i = 0; i < 4; ++i) p.push_back(pg_array_literal(cols[i]));
  p.push_back(clip_chars(cfg.actor, 128));   // $5
  for (size_t i = 4; i < cols.size(); ++i) p.push_back(pg_array_literal(cols[i]));
  return p;
}

Params hold_params(const std::vector<std::string>& snapshot_ids, const std::vector<std::string>& event_ids, double hold_ms) {
  Column s, e;
  for (const auto& id : snapshot_ids)
    if (!id.empty()) s.push_back(id);
  for (const auto& id : event_ids)
    if (!id.empty()) e.push_back(id);
  return {pg_array_literal(s), pg_array_literal(e), ms_text(hold_ms)};
}

Params outcome_params(const std::vector<PendingOutcome>& pending, const std::vector<std::string>& outcomes,
                      const std::vector<std::string>& quarantine_ids) {
  Column s, e, o, q, eh, sh, own;
  for (size_t i = 0; i < pending.size(); ++i) {
    const PendingOutcome& p = pending[i];
    own.push_back(p.wrote_snapshot ? "t" : "f");
    s.push_back(p.snapshot_id);
    e.push_back(p.event_id);
    o.push_back(outcomes[i]);
    q.push_back(i < quarantine_ids.size() ? quarantine_ids[i] : std::string());
    eh.push_back(p.hold_ms ? ms_text(*p.hold_ms) : std::string());
    sh.push_back(p.hold_ms && p.wrote_snapshot ? ms_text(*p.hold_ms) : std::string());
  }
  return {pg_array_literal(s), pg_array_literal(e), pg_array_literal(o), pg_array_literal(q), pg_array_literal(eh),
          pg_array_literal(sh), pg_array_literal(own)};
}

namespace {

// RAND_bytes checks getpid() on every call to notice a fork, a system call each time; a hold asks for
// two or three UUIDs. So each thread draws a block once and hands it out 16 bytes at a time; a fork
// (pthread_atfork below) throws every thread's unused bytes away, so parent and child never share one.
constexpr size_t kUuidBlock = 16 * 64;
std::atomic<uint64_t> fork_generation{0};

struct UuidBytes {
  unsigned char block[kUuidBlock];
  size_t used = kUuidBlock;
  uint64_t generation = 0;

  void next(unsigned char (&out)[16]) {
    static const bool registered = [] {
      pthread_atfork(nullptr, nullptr, [] { fork_generation.fetch_add(1, std::memory_order_relaxed); });
      return true;
    }();
    (void)registered;
    const uint64_t now = fork_generation.load(std::memory_order_relaxed);
    if (used == kUuidBlock || generation != now) {
      if (RAND_bytes(block, sizeof block) != 1) {
        static thread_local std::mt19937_64 rng(std::random_device{}());
        for (auto& x : block) x = static_cast<unsigned char>(rng());
      }
      used = 0;
      generation = now;
    }
    std::memcpy(out, block + used, sizeof out);
    std::memset(block + used, 0, sizeof out);  // a byte handed out is never kept
    used += sizeof out;
  }
};

}  // namespace

std::string new_uuid() {
  static thread_local UuidBytes bytes;
  unsigned char b[16];
  bytes.next(b);
  // Time first (RFC 9562 version 7): the store's ids are its B-tree keys (the snapshot and ledger
  // primary keys, the ledger's snapshot_id, pair_of), and a random key lands each insert and each
  // outcome update on a leaf page of its own anywhere in the index. Time-ordered keys land on the
  // few newest leaves. In a store of 1,000,000 snapshots, recreating tables at one client, a hold's
  // store write executed in 0.43 ms with random ids and 0.34 ms with these (issue 21).
  // The 12 bits after the time count within its millisecond (RFC 9562, method 1), so that ids made
  // in one process sort in the order made even within a millisecond: an outcome check tells the
  // later of two DROPs of one table by its event id (quarantine/store_rows.hpp). A count past 4,095
  // carries into the time, which runs ahead of the clock by as much.
  const uint64_t now_ms = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
  static std::atomic<uint64_t> last_made{0};
  uint64_t made = last_made.load(std::memory_order_relaxed), next;
  do next = std::max(now_ms << 12, made + 1);
  while (!last_made.compare_exchange_weak(made, next, std::memory_order_relaxed));
  const uint64_t ms = next >> 12;
  for (int i = 0; i < 6; ++i) b[i] = static_cast<unsigned char>(ms >> (8 * (5 - i)));
  b[6] = static_cast<unsigned char>(0x70 | ((next >> 8) & 0x0F));  // version 7
  b[7] = static_cast<unsigned char>(next & 0xFF);
  b[8] = (b[8] & 0x3F) | 0x80;  // RFC 9562 variant
  static constexpr char hex[] = "0123456789abcdef";
  std::string out(36, '-');
  size_t at = 0;
  for (int i = 0; i < 16; ++i) {
    if (at == 8 || at == 13 || at == 18 || at == 23) ++at;
    out[at++] = hex[b[i] >> 4];
    out[at++] = hex[b[i] & 0x0F];
  }
  return out;
}

}  // namespace predrop::capture
