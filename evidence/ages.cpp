#include "evidence/ages.hpp"

#include <nlohmann/json.hpp>

#include "capture/snapshot.hpp"

namespace predrop::evidence {

namespace {

// A row that is the before of a DROP that went through.
constexpr const char* kCompletedDrop =
    "reason NOT LIKE 'post\\_%' AND reason <> 'baseline' AND coalesce(drop_outcome, '') IN ('dropped', 'quarantined')";

// The ledger serve writes next to every store (migrations/0001_store.sql): a DROP whose snapshot was missed
// (fail open) has no before in the store, only its ledger row, which the outcome check marks
// 'dropped' once the DROP went through.
constexpr const char* kLedgerTable = "predrop.drop_events";

// Columns: database, schema, table, since, since_from, at_least, age_s, versions, shapes, last_seen.
// $1 database or NULL, $2 schema or NULL, $3 the window in days.
// counts false: versions and shapes are 0 (the metric needs neither, and count DISTINCT sorts).
std::string ages_sql(PgSession& store, const std::string& store_table, bool counts = true) {
  const std::string t = store.quote_qualified(store_table);
  // A store table predrop did not migrate may have no ledger beside it, and a reader of the store
  // may not be granted it: then only the store says.
  const bool has_ledger =
      store.exec("SELECT coalesce(has_table_privilege(to_regclass($1), 'SELECT'), false)", {std::string(kLedgerTable)})
          .text(0, 0) == "t";
  const std::string missed =
      has_ledger ?
      ", missed AS (SELECT database_name, schema_name, table_name, max(occurred_at) AS gone_at"
      "               FROM " + store.quote_qualified(kLedgerTable) +
      "              WHERE snapshot_id IS NULL AND drop_outcome IN ('dropped', 'quarantined')"
      "                AND ($1::text IS NULL OR database_name = $1) AND ($2::text IS NULL OR schema_name = $2)"
      "              GROUP BY 1, 2, 3)"
      : ", missed AS (SELECT NULL::text AS database_name, NULL::text AS schema_name, NULL::text AS table_name,"
        "                    NULL::timestamptz AS gone_at WHERE false)";
  // The store's time, not this machine's: ages are differences of the server's own timestamps.
  // One pass of hash aggregation, no sort: a table is gone when its newest snapshot is the before of
  // a DROP that went through, or a DROP of it whose snapshot was missed went through after its newest
  // snapshot (gone_at is the newest of those, alive_at its newest other snapshot). The metric reads
  // only the ages.
  return
      "WITH agg AS (SELECT database_name, schema_name, table_name,"
      "                max(captured_at) FILTER (WHERE reason = 'post_create') AS created,"
      "                min(captured_at) FILTER (WHERE reason = 'baseline') AS baselined,"
      "                min(captured_at) AS first_seen, max(captured_at) AS last_seen,"
      "                max(captured_at) FILTER (WHERE " + std::string(kCompletedDrop) + ") AS gone_at,"
      "                max(captured_at) FILTER (WHERE NOT (" + kCompletedDrop + ")) AS alive_at,"
      + std::string(counts ?
      "                count(*) FILTER (WHERE reason = 'post_create'"
      "                                   AND captured_at >= now() - make_interval(days => $3::int)) AS versions,"
      "                count(DISTINCT schema_hash) FILTER (WHERE captured_at >= now() - make_interval(days => $3::int)) AS shapes"
      : "                0 AS versions, 0 * $3::int AS shapes") +
      "           FROM " + t + " WHERE ($1::text IS NULL OR database_name = $1) AND ($2::text IS NULL OR schema_name = $2)"
      "          GROUP BY 1, 2, 3)" + missed +
      " SELECT database_name, schema_name, table_name,"
      "        to_char(coalesce(created, baselined, first_seen) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),"
      "        CASE WHEN created IS NOT NULL THEN 'post_create' WHEN baselined IS NOT NULL THEN 'baseline'"
      "             ELSE 'first_snapshot' END,"
      "        created IS NULL,"
      "        floor(extract(epoch FROM now() - coalesce(created, baselined, first_seen)))::bigint,"
      "        versions, shapes,"
      "        to_char(last_seen AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"
      "   FROM (SELECT a.database_name, a.schema_name, a.table_name, a.created, a.baselined, a.first_seen, a.last_seen,"
      "                a.versions, a.shapes, a.alive_at, greatest(a.gone_at, m.gone_at) AS gone_at"
      "           FROM agg a LEFT JOIN missed m ON m.database_name IS NOT DISTINCT FROM a.database_name"
      "                AND m.schema_name = a.schema_name AND m.table_name = a.table_name) agg"
      "  WHERE gone_at IS NULL OR alive_at > gone_at"
      "  ORDER BY 7 DESC, 1, 2, 3";
}

capture::Params ages_params(const AgesQuery& q) {
  capture::Params params;
  params.push_back(q.database ? std::optional<std::string>(*q.database) : std::nullopt);
  params.push_back(q.schema ? std::optional<std::string>(*q.schema) : std::nullopt);
  params.push_back(std::to_string(q.window_days));
  return params;
}

}  // namespace

std::vector<TableAge> table_ages(PgSession& store, const std::string& store_table, const AgesQuery& q) {
  auto r = store.exec(ages_sql(store, store_table), ages_params(q));
  std::vector<TableAge> out;
  out.reserve(r.rows());
  for (int i = 0; i < r.rows(); ++i) {
    TableAge a;
    a.database = r.is_null(i, 0) ? "" : r.text(i, 0);
    a.schema = r.text(i, 1);
    a.table = r.text(i, 2);
    a.since = r.text(i, 3);
    a.since_from = r.text(i, 4);
    a.at_least = r.text(i, 5) == "t";
    a.age_s = std::stoll(r.text(i, 6));
    a.versions_in_window = std::stoll(r.text(i, 7));
    a.shapes_in_window = std::stoll(r.text(i, 8));
    a.last_seen = r.text(i, 9);
    out.push_back(std::move(a));
  }
  return out;
}

std::vector<AgeHistogram> age_histograms(PgSession& store, const std::string& store_table,
                                         const std::vector<int64_t>& bounds) {
  std::string sql = "SELECT a.database_name, a.schema_name";
  for (int64_t b : bounds) sql += ", count(*) FILTER (WHERE a.age_s <= " + std::to_string(b) + ")";
  sql += ", count(*), coalesce(sum(a.age_s), 0) FROM (" + ages_sql(store, store_table, false) +
         ") a (database_name, schema_name, table_name, since, since_from, at_least, age_s, versions, shapes, last_seen)"
         " GROUP BY 1, 2 ORDER BY 1, 2";
  auto r = store.exec(sql, ages_params(AgesQuery{}));
  std::vector<AgeHistogram> out;
  for (int i = 0; i < r.rows(); ++i) {
    AgeHistogram h;
    h.database = r.is_null(i, 0) ? "" : r.text(i, 0);
    h.schema = r.text(i, 1);
    for (size_t b = 0; b < bounds.size(); ++b) h.cumulative.push_back(std::stoll(r.text(i, 2 + static_cast<int>(b))));
    h.count = std::stoll(r.text(i, 2 + static_cast<int>(bounds.size())));
    h.sum_s = std::stoll(r.text(i, 3 + static_cast<int>(bounds.size())));
    out.push_back(std::move(h));
  }
  return out;
}

namespace {

nlohmann::json histograms_json(const std::vector<AgeHistogram>& hs) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& h : hs)
    out.push_back({{"database", h.database}, {"schema", h.schema}, {"cumulative", h.cumulative}, {"count", h.count},
                   {"sum_s", h.sum_s}});
  return out;
}

std::vector<AgeHistogram> histograms_of(const std::string& text) {
  std::vector<AgeHistogram> out;
  for (const auto& j : nlohmann::json::parse(text)) {
    AgeHistogram h;
    h.database = j.at("database").get<std::string>();
    h.schema = j.at("schema").get<std::string>();
    h.cumulative = j.at("cumulative").get<std::vector<int64_t>>();
    h.count = j.at("count").get<int64_t>();
    h.sum_s = j.at("sum_s").get<int64_t>();
    out.push_back(std::move(h));
  }
  return out;
}

}  // namespace

SharedAges shared_age_histograms(PgSession& store, const std::string& store_table, const std::vector<int64_t>& bounds,
                                 int64_t fresh_for_ms) {
  SharedAges out;
  auto compute = [&] {
    out.histograms = age_histograms(store, store_table, bounds);
    out.computed = true;
    out.computed_at = std::stod(store.exec("SELECT extract(epoch FROM now())").text(0, 0));
  };
  // A store not migrated to version 7, or a role the table was not granted to (a capture role whose
  // grants predate it: deploy/sql/capture-role.sql), computes on its own, as every serve did before.
  if (store.exec("SELECT coalesce(has_table_privilege(to_regclass('predrop.table_ages'), 'SELECT, INSERT, UPDATE'), false)")
          .text(0, 0) != "t") {
    compute();
    return out;
  }
  std::vector<std::optional<std::string>> bound_texts;
  for (int64_t b : bounds) bound_texts.push_back(std::to_string(b));
  const std::string bounds_text = capture::pg_array_literal(bound_texts);
  const capture::Params key{store_table, bounds_text, std::to_string(fresh_for_ms)};
  // The row with these bounds: whether it is fresh, its histograms, when it was computed.
  auto shared = [&]() -> std::optional<bool> {
    auto r = store.exec("SELECT computed_at > now() - $3::bigint * interval '1 millisecond', histograms::text,"
                        " extract(epoch FROM computed_at) FROM predrop.table_ages"
                        " WHERE store_table = $1 AND bounds = $2::bigint[]",
                        key);
    if (r.rows() == 0) return std::nullopt;
    // A row that does not read as histograms (written by hand, or by another version) is no row:
    // computed again and written over.
    try {
      out.histograms = histograms_of(r.text(0, 1));
    } catch (const std::exception&) {
      out.histograms.clear();
      return std::nullopt;
    }
    out.computed_at = std::stod(r.text(0, 2));
    return r.text(0, 0) == "t";
  };
  store.exec("BEGIN");
  try {
    auto fresh = shared();
    if (!fresh || !*fresh) {
      const bool locked = store.exec("SELECT pg_try_advisory_xact_lock($1::int, hashtext($2))",
                                     {std::to_string(kAgesLockClass), store_table})
                              .text(0, 0) == "t";
      // Another serve is computing them: its row, fresh in a moment, is as good as this one's.
      if (locked) fresh = shared();
      if (locked && !(fresh && *fresh)) {
        compute();
        store.exec("INSERT INTO predrop.table_ages AS a (store_table, bounds, computed_at, histograms)"
                   " VALUES ($1, $2::bigint[], now(), $3::jsonb) ON CONFLICT (store_table) DO UPDATE"
                   " SET bounds = EXCLUDED.bounds, computed_at = EXCLUDED.computed_at, histograms = EXCLUDED.histograms",
                   {store_table, bounds_text, histograms_json(out.histograms).dump()});
      } else if (!fresh) {
        compute();   // nothing shared yet with these bounds
      }
    }
    store.exec("COMMIT");
  } catch (...) {
    // A store whose role may read the row and not write it still gets the histograms.
    const bool had = out.computed;
    try {
      store.exec("ROLLBACK");
    } catch (...) {
    }
    if (!had) throw;
  }
  return out;
}

}  // namespace predrop::evidence
