#include "evidence/baseline.hpp"

#include <algorithm>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <map>
#include <set>

#include "capture/snapshot.hpp"
#include "capture/store_writer.hpp"

namespace predrop::evidence {

using namespace predrop::capture;

namespace {

using Clock = std::chrono::steady_clock;
using Name = std::pair<std::string, std::string>;

// Live tables (plain and partitioned) of the target with their column names sorted byte-wise
// (COLLATE "C": the locale's order made the reference flag 23,781 tables instead of 7).
constexpr const char* kLiveTablesSql = R"SQL(
SELECT n.nspname, c.relname,
       ARRAY(SELECT a.attname::text FROM pg_attribute a
              WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
              ORDER BY a.attname::text COLLATE "C")::text
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE c.relkind IN ('r', 'p')
   AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_%'
   AND ($1::text[] IS NULL OR n.nspname = ANY ($1::text[]))
 ORDER BY n.nspname COLLATE "C", c.relname COLLATE "C"
)SQL";

// The latest snapshot's names per table, sorted the same way, of the listed schemas or (NULL) all.
// Rows the reference application wrote carry no database_name and count for every database.
constexpr const char* kLatestNamesSql = R"SQL(
SELECT DISTINCT ON (s.schema_name, s.table_name) s.schema_name, s.table_name,
       ARRAY(SELECT e->>'name'
               FROM jsonb_array_elements(CASE WHEN jsonb_typeof(s.columns_profile) = 'array'
                                              THEN s.columns_profile ELSE '[]'::jsonb END) e
              ORDER BY (e->>'name') COLLATE "C")::text
  FROM @STORE@ s
 WHERE ($1::text[] IS NULL OR s.schema_name = ANY ($1::text[])) AND (s.database_name = $2 OR s.database_name IS NULL)
 ORDER BY s.schema_name, s.table_name, s.captured_at DESC
)SQL";

// One statement inserts the batch and notifies each row, so a listener hears of exactly the rows
// that committed.
constexpr const char* kInsertSql = R"SQL(
WITH ins AS (
INSERT INTO @STORE@ (id, @SNAPSHOT_COLUMNS@)
SELECT i.id, i.schema_name, i.table_name, i.resource_identity, i.version, 'baseline', $16, i.column_count,
       i.row_count_estimate, i.schema_hash, i.columns_profile::jsonb, i.stats_available, i.extra::jsonb,
       i.parser_version, i.normalization_version, i.layout_profile, i.header_quality, i.is_truncated, $17, i.table_oid
  FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::int[], $6::bigint[], $7::text[], $8::text[],
              $9::bool[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[], $15::bool[], $18::bigint[],
              $19::uuid[])
       AS i(schema_name, table_name, resource_identity, version, column_count, row_count_estimate, schema_hash,
            columns_profile, stats_available, extra, parser_version, normalization_version, layout_profile,
            header_quality, is_truncated, table_oid, id)
RETURNING id, database_name, schema_name, table_name, reason, schema_hash, pair_of, captured_at
)
SELECT count(@NOTIFY@) FROM ins
)SQL";

std::vector<std::string> names_of(const std::string& array_text) {
  ProfileBounds unbounded{1 << 20, 1 << 20, 1 << 20};
  auto v = parse_pg_array(array_text, unbounded, false);
  std::sort(v.begin(), v.end());  // byte-wise, as COLLATE "C": belt and braces
  return v;
}

std::string replace_store(std::string sql, const std::string& store) {
  expand_snapshot_sql(sql, "ins");
  replace_all(sql, "@STORE@", store);
  return sql;
}

std::optional<std::string> opt(const std::optional<std::string>& s, size_t width) {
  if (!s) return std::nullopt;
  return clip_chars(*s, static_cast<int>(width));
}

Params insert_params(const std::vector<CapturedTable>& tables, const BaselineOptions& o, const std::string& db) {
  std::vector<std::vector<std::optional<std::string>>> c(17);
  auto num = [](auto v) { return std::optional<std::string>(std::to_string(v)); };
  for (const auto& t : tables) {
    const auto& s = t.snap;
    const auto& e = t.enrich;
    c[0].push_back(s.schema_name);
    c[1].push_back(s.table_name);
    c[2].push_back(opt(e.resource_identity, 512));
    c[3].push_back(e.version ? num(*e.version) : std::nullopt);
    c[4].push_back(num(s.columns.size()));
    c[5].push_back(s.row_count_estimate ? num(*s.row_count_estimate) : std::nullopt);
    c[6].push_back(s.schema_hash);
    c[7].push_back(columns_profile_json(s.columns));
    c[8].push_back(std::string(s.stats_available ? "t" : "f"));
    // The reference's baseline extra: identity, version and whether the table is live (it is:
    // the candidates are tables that exist now).
    nlohmann::json extra{{"alive", true}};
    if (e.resource_identity) extra["resource_identity"] = *e.resource_identity;
    if (e.version) extra["version"] = *e.version;
    if (s.profile_skipped) extra["profile_skipped"] = "too_many_columns";
    c[9].push_back(extra.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    c[10].push_back(opt(e.parser_version, 40));
    c[11].push_back(opt(e.normalization_version, 40));
    c[12].push_back(opt(e.layout_profile, 40));
    c[13].push_back(opt(e.header_quality, 20));
    c[14].push_back(e.is_truncated ? std::optional<std::string>(*e.is_truncated ? "t" : "f") : std::nullopt);
    c[15].push_back(num(s.table_oid));
    c[16].push_back(new_uuid());  // time-ordered, as the hold's rows (capture/capture.hpp)
  }
  Params p;
  for (int i = 0; i < 15; ++i) p.push_back(pg_array_literal(c[i]));
  p.push_back(clip_chars(o.actor, 128));  // $16
  p.push_back(db);                        // $17
  p.push_back(pg_array_literal(c[15]));   // $18
  p.push_back(pg_array_literal(c[16]));   // $19
  return p;
}

// A baseline's sessions open at once, each on a thread of its own: every one is a backend's start
// and, under libpq's sslmode=prefer, a TLS handshake (22 to 29 ms each on the 2-core test machine),
// where a baseline of 300 analysed tables takes about 0.19 s, and a new backend's first statements
// cost several times what they cost warm (the listing 20 ms against 3). `read_only` sessions read the
// target, twice over: the session default (so even a statement outside the baseline's
// transactions could not write) and an explicit READ ONLY transaction per batch.
std::future<std::unique_ptr<PgSession>> open_session(const std::string& conninfo, bool read_only) {
  return std::async(std::launch::async, [conninfo, read_only] {
    // A batch's statements are prepared once a session (PgSession::exec_prepared) and probe by
    // name and OID, so a generic plan is as good as a custom one; planning the catalog read again
    // for every batch cost about 5 ms of the server's time per 100 tables.
    auto session = std::make_unique<PgSession>(
        conninfo, "predrop-baseline",
        read_only ? "-c default_transaction_read_only=on -c plan_cache_mode=force_generic_plan" : "");
    if (read_only) session->run("SET default_transaction_read_only = on");
    return session;
  });
}

void enrich(PgSession& target, const std::string& sql, std::vector<CapturedTable>& tables) {
  auto q = enrich_query(sql, tables);
  if (!q) return;
  apply_enrichment(target.exec(q->sql, q->params), tables);
}

}  // namespace

std::vector<CapturedTable> read_tables(PgSession& target, const std::vector<Name>& names, const ProfileBounds& bounds,
                                       bool naive, const std::vector<std::string>& hash_excluded) {
  SnapshotRequest req;
  for (const auto& [schema, table] : names) req.targets.push_back({TargetKind::relation, schema, table, {}, {}, 0});
  // One statement: the catalog with each column's pg_stats row beside it (capture_query).
  auto cq = capture_query(req, bounds, naive);
  auto cat = parse_capture(cq.name ? target.exec_prepared(cq.name, cq.sql, cq.params) : target.exec(cq.sql, cq.params),
                           req.targets.size(), bounds, naive);
  // A partitioned table's partitions come along; keep exactly the relations asked for.
  std::set<Name> wanted(names.begin(), names.end());
  std::vector<CapturedTable> tables;
  for (auto& t : cat.tables)
    if (wanted.count({t.snap.schema_name, t.snap.table_name})) tables.push_back(std::move(t));
  mark_profile_skipped(tables, bounds);
  for (auto& t : tables) {
    std::vector<std::string> cols;
    for (const auto& c : t.snap.columns) cols.push_back(c.name);
    t.snap.schema_hash = schema_hash(cols, hash_excluded);
  }
  return tables;
}

BaselineResult run_baseline(const BaselineOptions& o) {
  auto start = Clock::now();
  BaselineResult res;
  // The target's refusal is the one reported when both are refused, as when they opened in turn.
  auto target_opening = open_session(o.target_conninfo, true);
  auto writer_opening = open_session(o.store_conninfo, false);
  const auto target_session = target_opening.get();
  const auto writer_session = writer_opening.get();
  PgSession& target = *target_session;
  PgSession& writer = *writer_session;
  const std::string quoted_store = writer.quote_qualified(o.store_table);

  res.database = target.exec("SELECT current_database()").text(0, 0);
  Params filter{o.schemas.empty() ? std::nullopt : std::optional<std::string>(pg_array_literal({o.schemas.begin(), o.schemas.end()}))};
  // The store's latest names are read while the target lists its tables: two new backends' first
  // statements, about 8 and 15 ms, side by side. Without --schema that is every schema's of this
  // database, the tables not listed below left unused.
  auto latest_reading = std::async(std::launch::async, [&writer, &filter, &res, sql = replace_store(kLatestNamesSql, quoted_store)] {
    return writer.exec(sql, {filter[0], res.database});
  });
  // (Should the listing throw, the future's destructor waits for the writer before it is closed.)
  target.run("BEGIN TRANSACTION READ ONLY");
  const auto live = target.exec(kLiveTablesSql, filter);
  target.run("COMMIT");
  const auto latest_names = latest_reading.get();

  struct Table {
    Name name;
    std::vector<std::string> columns;
  };
  std::vector<Table> tables;
  std::set<std::string> schemas;
  const Name store_name = split_qualified(o.store_table);
  for (int i = 0; i < live.rows(); ++i) {
    Table t{{live.text(i, 0), live.text(i, 1)}, names_of(live.text(i, 2))};
    if (t.name.first == "predrop" || t.name == store_name) continue;
    if (o.include && !o.include(res.database, t.name.first, t.name.second)) continue;
    schemas.insert(t.name.first);
    tables.push_back(std::move(t));
  }
  res.tables = static_cast<int>(tables.size());

  // Read on the writer: a reader session of its own was a third connection to open for one statement.
  std::map<Name, std::vector<std::string>> latest;
  for (int i = 0; i < latest_names.rows(); ++i) {
    Name name{latest_names.text(i, 0), latest_names.text(i, 1)};
    if (schemas.count(name.first)) latest[name] = names_of(latest_names.text(i, 2));
  }
  // Tables never snapshotted first, then those whose shape moved on; each group by name.
  std::vector<Name> never, moved;
  for (const auto& t : tables) {
    auto it = latest.find(t.name);
    if (it == latest.end()) never.push_back(t.name);
    else if (it->second != t.columns) moved.push_back(t.name);
  }
  std::vector<Name> todo = never;
  todo.insert(todo.end(), moved.begin(), moved.end());
  res.candidates = static_cast<int>(todo.size());
  if (o.limit > 0 && static_cast<int>(todo.size()) > o.limit) todo.resize(o.limit);

  const std::string insert = replace_store(kInsertSql, quoted_store);
  int batch = std::max(1, o.batch_size);
  std::vector<std::vector<Name>> batches;
  for (size_t i = 0; i < todo.size(); i += batch)
    batches.emplace_back(todo.begin() + i, todo.begin() + std::min(todo.size(), i + batch));
  // Lanes: a read-only target session and a store writer each, taking every lanes-th batch.
  // Sessions open here, so a refused connection fails the run as the first one would.
  int lanes = std::clamp(o.lanes, 1, std::max(1, static_cast<int>(batches.size())));
  std::vector<std::future<std::unique_ptr<PgSession>>> targets_opening, writers_opening;
  for (int l = 1; l < lanes; ++l) {
    targets_opening.push_back(open_session(o.target_conninfo, true));
    writers_opening.push_back(open_session(o.store_conninfo, false));
  }
  std::vector<std::unique_ptr<PgSession>> targets, writers;
  for (int l = 1; l < lanes; ++l) {
    targets.push_back(targets_opening[l - 1].get());
    writers.push_back(writers_opening[l - 1].get());
  }
  std::mutex mu;  // guards res and the progress callback
  int done = 0;
  auto lane = [&](PgSession& tgt, PgSession& wr, size_t first) {
    // The store write of one batch runs while this lane's target session reads the next.
    std::future<std::optional<std::string>> write;  // an error message, or nothing
    int writing = 0;
    auto settle = [&] {
      if (!write.valid()) return;
      auto err = write.get();
      std::lock_guard<std::mutex> g(mu);
      if (err) {
        res.errors.push_back(*err);
        res.skipped += writing;
      } else {
        res.captured += writing;
      }
      writing = 0;
    };
    for (size_t b = first; b < batches.size(); b += lanes) {
      if (o.cancelled && o.cancelled()) {
        std::lock_guard<std::mutex> g(mu);
        res.interrupted = true;
        break;
      }
      const auto& part = batches[b];
      std::vector<CapturedTable> captured;
      std::optional<std::string> failed;
      try {
        tgt.run("BEGIN TRANSACTION READ ONLY");
        captured = read_tables(tgt, part, o.bounds, o.naive_array_split, o.hash_excluded);
        enrich(tgt, o.enrich_identity_sql, captured);
        enrich(tgt, o.enrich_provenance_sql, captured);
        tgt.run("COMMIT");
      } catch (const std::exception& e) {
        failed = e.what();
        try {
          tgt.run("ROLLBACK");
        } catch (...) {
        }
        captured.clear();
      }
      {
        std::lock_guard<std::mutex> g(mu);
        if (failed) res.errors.push_back(*failed);
        res.skipped += static_cast<int>(part.size() - captured.size());  // vanished since the listing, or failed
      }
      settle();
      if (!captured.empty()) {
        writing = static_cast<int>(captured.size());
        // The rows' parameters are built on the writer's thread too: this lane's next catalog read
        // goes out at once.
        write = std::async(std::launch::async, [&wr, &insert, &o, &db = res.database, captured = std::move(captured)]()
                                                   -> std::optional<std::string> {
          try {
            wr.exec_prepared("predrop_baseline_insert", insert, insert_params(captured, o, db));
            return std::nullopt;
          } catch (const std::exception& e) {
            return std::string(e.what());
          }
        });
      }
      std::lock_guard<std::mutex> g(mu);
      done += static_cast<int>(part.size());
      if (o.progress) o.progress(done, static_cast<int>(todo.size()));
    }
    settle();
  };
  // Nothing may escape a lane: an exception would end the process from a thread, or skip the joins.
  auto guarded = [&](PgSession& tgt, PgSession& wr, size_t first) {
    try {
      lane(tgt, wr, first);
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> g(mu);
      res.errors.push_back(e.what());
    }
  };
  {
    std::vector<std::thread> others;
    for (int l = 1; l < lanes; ++l) others.emplace_back(guarded, std::ref(*targets[l - 1]), std::ref(*writers[l - 1]), l);
    guarded(target, writer, 0);
    for (auto& t : others) t.join();
  }
  res.remaining = res.candidates - res.captured;
  res.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  res.tables_per_s = res.seconds > 0 ? res.captured / res.seconds : 0;
  return res;
}

}  // namespace predrop::evidence
