#include "capture/catalog_queries.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <regex>
#include <set>

#include "quarantine/move_sql.hpp"

namespace predrop::capture {

namespace {

// Relation kinds a snapshot covers: tables, partitioned tables, matviews, foreign tables, views.
// The statement is built from parts (capture_sql): the targets ($1..$3) and the path ($4); the
// roots each kind of target reaches; the tree of a partitioned root's partitions; the select.
constexpr const char* kTargetCtes = R"SQL(
WITH RECURSIVE t AS (
  SELECT * FROM unnest($1::text[], $2::name[], $3::name[]) WITH ORDINALITY AS t(kind, sch, nm, tord)
), sp AS (
  SELECT * FROM unnest($4::name[]) WITH ORDINALITY AS sp(nsp, pord)
), roots AS (
  -- schema-qualified relation names
  SELECT t.tord, c.oid
    FROM t JOIN pg_namespace n ON n.nspname = t.sch
           JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = t.nm
   WHERE t.kind IN ('relation', 'after_by_name') AND t.sch <> ''
  UNION ALL
  -- unqualified: the first schema of the path holding a relation of that name, of any kind,
  -- exactly as the server's lookup does (an index found first means no table is dropped)
  SELECT u.tord, u.oid FROM (
    SELECT DISTINCT ON (t.tord) t.tord, c.oid
      FROM t JOIN sp ON true
             JOIN pg_namespace n ON n.nspname = sp.nsp
             JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = t.nm
     WHERE t.kind IN ('relation', 'after_by_name') AND t.sch = ''
     ORDER BY t.tord, sp.pord) u)SQL";

// The roots of the other kinds of target, which only the full statement reads ($5: the roles).
constexpr const char* kOtherRoots = R"SQL(
  UNION ALL
  -- an after's statistics (post_analyze): the table it captured, whatever its name is now, unless
  -- a quarantine moved it (its comment says so, quarantine/move_sql.cpp): that is a DROP's, whose
  -- before has the table's shape, and the table is no longer the user's
  SELECT t.tord, c.oid
    FROM t JOIN pg_class c ON c.oid = CASE WHEN t.kind = 'after_by_oid' THEN t.nm::oid END
   WHERE t.kind = 'after_by_oid'
     AND NOT EXISTS (SELECT 1 FROM pg_description d
                      WHERE d.objoid = c.oid AND d.classoid = 'pg_class'::regclass AND d.objsubid = 0
                        AND @QUARANTINE_MARK@)
  UNION ALL
  -- DROP SCHEMA: every relation in it
  SELECT t.tord, c.oid
    FROM t JOIN pg_namespace n ON n.nspname = t.nm
           JOIN pg_class c ON c.relnamespace = n.oid
   WHERE t.kind = 'schema'
  UNION ALL
  -- DROP OWNED BY: every relation the roles own, temp and system schemas aside
  SELECT t.tord, c.oid
    FROM t JOIN pg_class c ON c.relowner IN (SELECT r.oid FROM pg_roles r WHERE r.rolname = ANY ($5::name[]))
           JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE t.kind = 'owned_by'
     AND n.nspname NOT LIKE 'pg\_temp\_%' AND n.nspname NOT LIKE 'pg\_toast%'
     AND n.nspname NOT IN ('pg_catalog', 'information_schema'))SQL";

constexpr const char* kTree = R"SQL(
), tree AS (
  SELECT tord, oid FROM roots
  UNION
  -- a partitioned table's partitions go with what destroys it, to any depth; an after
  -- (capture/target.hpp: after_by_name, after_by_oid) is of the relation its statement named
  -- alone, as the server reports that statement
  SELECT tree.tord, i.inhrelid
    FROM tree JOIN pg_class p ON p.oid = tree.oid AND p.relkind = 'p'
              JOIN pg_inherits i ON i.inhparent = tree.oid
   WHERE (SELECT t.kind FROM t WHERE t.tord = tree.tord) NOT IN ('after_by_name', 'after_by_oid')
)
)SQL";

// A hold's capture in one statement (issue 21: one round trip and one statement a hold, not two):
// the catalog read with each column's pg_stats row beside it (@VALUES@ entries, each clipped to
// @CHARS@ characters in proper mode; the naive mode clips per part on our side), the
// table's own statistics ahead of its inheritance tree's (a partitioned table has only the latter).
// pg_stats is read once a table and matched to its columns by name: read once a column, each
// column paid the view's own lookups again (namespace, class, attribute), and a 30-column table's
// read took 1.56 ms against 0.55 ms (issue 21). Columns
// 9..13: found, null_frac, n_distinct, most_common_vals, histogram_bounds; 14: the server, as the
// store write compares it (store_writer.cpp, kWriteEndSql's sc).
constexpr const char* kCaptureSelect = R"SQL(
SELECT tree.tord, c.oid, n.nspname, c.relname, c.relkind,
       CASE WHEN c.reltuples < 0 THEN NULL ELSE c.reltuples::bigint END,
       a.attnum, a.attname, format_type(a.atttypid, a.atttypmod),
       st.found, st.null_frac, st.n_distinct, st.mcv, st.hist,
       pg_postmaster_start_time()::text || '/' || coalesce(inet_server_port(), 0)::text
  FROM tree
  CROSS JOIN LATERAL (SELECT * FROM pg_class c WHERE c.oid = tree.oid AND c.relkind IN ('r', 'p', 'm', 'f', 'v') OFFSET 0) c
  JOIN pg_namespace n ON n.oid = c.relnamespace
  LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
  LEFT JOIN LATERAL (
    SELECT DISTINCT ON (s.attname) s.attname, true AS found, s.null_frac, s.n_distinct, @MCV@ AS mcv, @HIST@ AS hist
      FROM pg_stats s
     WHERE c.relkind <> 'v' AND s.schemaname = n.nspname AND s.tablename = c.relname
     ORDER BY s.attname, s.inherited) st ON st.attname = a.attname
 ORDER BY tree.tord, c.oid, a.attnum
)SQL";
// Proper mode: an array stored uncompressed in at most @VALUES@ x @CHARS@ bytes goes whole, as
// the text of its one output, and parse_proper (capture/snapshot.cpp) takes its first @VALUES@
// values and clips each as left() would; any other is sliced on the server, and clipped there when
// its text is over that bound too, so that no read carries much more than that (text can run to
// about three times the stored size: timestamps, bytea). A compressed array's stored size says
// nothing of its text: 20 values of 880 characters were 334 bytes in pg_statistic and 17,651 as
// text. Slicing on the server costs an output, a parse and another output of each array: a quarter
// of a catalog read of 300 analysed tables, 48 against 36 ms of execution and 61 against 44 ms at
// the client (issue 21). SQL_ASCII counts bytes where we count UTF-8 characters, so there the
// server clips. No array is no value (NULL), without the clipping's subquery. (At most
// 10,000 x 100,000: the product fits an int.)
constexpr const char* kProperArray =
    "CASE WHEN s.@COL@ IS NULL THEN NULL "
    "WHEN pg_column_size(s.@COL@) <= @VALUES@::int * @CHARS@::int AND pg_column_compression(s.@COL@) IS NULL "
    "AND current_setting('server_encoding') <> 'SQL_ASCII' THEN s.@COL@::text "
    "WHEN octet_length(s.@COL@::text) <= @VALUES@::int * @CHARS@::int "
    "AND current_setting('server_encoding') <> 'SQL_ASCII' THEN (s.@COL@::text::text[])[1:@VALUES@::int]::text "
    "ELSE ARRAY(SELECT left(u.v, @CHARS@::int) FROM unnest((s.@COL@::text::text[])[1:@VALUES@::int]) "
    "WITH ORDINALITY AS u(v, o) ORDER BY u.o)::text END";
constexpr const char* kNaiveArray = "(s.@COL@::text::text[])[1:@VALUES@::int]::text";

// The full statement reads every kind of target; the lean one, for targets that only name
// relations (every DROP TABLE, ALTER TABLE and recreate), leaves out the other roots: their
// plan nodes are started and scanned on every execution even when no target uses them (issue 21:
// a tenth of a hold's catalog read). The lean one takes no roles, so its bounds are $5 and $6.
std::string capture_sql(bool lean, bool naive) {
  std::string sql = kTargetCtes;
  if (!lean) sql += kOtherRoots;
  sql += kTree;
  sql += kCaptureSelect;
  std::string mcv = naive ? kNaiveArray : kProperArray, hist = mcv;
  replace_all(mcv, "@COL@", "most_common_vals");
  replace_all(hist, "@COL@", "histogram_bounds");
  replace_all(sql, "@MCV@", mcv);
  replace_all(sql, "@HIST@", hist);
  replace_all(sql, "@QUARANTINE_MARK@", quarantine::kQuarantineMarkSql);
  replace_all(sql, "@VALUES@", lean ? "$5" : "$6");
  replace_all(sql, "@CHARS@", lean ? "$6" : "$7");
  return sql;
}

std::optional<double> to_double(const std::optional<std::string>& s) {
  if (!s) return std::nullopt;
  return std::strtod(s->c_str(), nullptr);
}

}  // namespace

// The targets, in order, with unqualified names resolved through search_path ("$user" is the
// session user; pg_catalog first unless listed, as the server does; temp schemas ignored): the
// capture statement's parameters $1..$5.
static Params target_params(const SnapshotRequest& req) {
  std::vector<std::optional<std::string>> kinds, schemas, names, path, roles;
  for (const auto& t : req.targets) {
    kinds.push_back(std::string(to_string(t.kind)));
    schemas.push_back(names_relation(t.kind) ? t.schema : "");
    names.push_back(t.kind == TargetKind::after_by_oid ? std::to_string(t.oid) : t.name);
    for (const auto& r : t.roles) roles.push_back(r);
  }
  bool has_catalog = false;
  std::vector<std::optional<std::string>> listed;
  for (const auto& s : req.search_path) {
    std::string nsp = s == "$user" ? req.ctx.session_user : s;
    if (nsp.empty() || nsp.rfind("pg_temp", 0) == 0) continue;  // the client's temp schema is not ours to see
    if (nsp == "pg_catalog") has_catalog = true;
    listed.push_back(nsp);
  }
  if (!has_catalog) path.push_back(std::string("pg_catalog"));
  path.insert(path.end(), listed.begin(), listed.end());
  return {pg_array_literal(kinds), pg_array_literal(schemas), pg_array_literal(names), pg_array_literal(path),
          pg_array_literal(roles)};
}

BatchQuery capture_query(const SnapshotRequest& request, const ProfileBounds& bounds, bool naive) {
  static const std::string full_proper = capture_sql(false, false), full_naive = capture_sql(false, true),
                           lean_proper = capture_sql(true, false), lean_naive = capture_sql(true, true);
  const bool lean = std::all_of(request.targets.begin(), request.targets.end(),
                                [](const TargetSpec& t) { return names_relation(t.kind); });
  BatchQuery q{lean ? (naive ? "predrop_capture_naive_lean_v2" : "predrop_capture_proper_lean_v4")
                    : (naive ? "predrop_capture_naive_v4" : "predrop_capture_proper_v6"),
               lean ? (naive ? lean_naive : lean_proper) : (naive ? full_naive : full_proper), target_params(request)};
  if (lean) q.params.pop_back();                                           // $5, the roles: none
  q.params.push_back(std::to_string(bounds.max_values));                   // values
  if (!naive) q.params.push_back(std::to_string(bounds.max_value_chars));  // chars: naive clips per part, client-side
  return q;
}

CatalogResult parse_catalog(const PgResult& r, size_t target_count) {
  CatalogResult out;
  out.target_found.assign(target_count, false);
  std::map<uint32_t, size_t> by_oid;
  for (int i = 0; i < r.rows(); ++i) {
    int target = std::atoi(r.text(i, 0).c_str()) - 1;
    uint32_t oid = static_cast<uint32_t>(std::strtoul(r.text(i, 1).c_str(), nullptr, 10));
    if (target >= 0 && static_cast<size_t>(target) < target_count) out.target_found[target] = true;
    auto [it, fresh] = by_oid.try_emplace(oid, out.tables.size());
    if (fresh) {
      CapturedTable t;
      t.snap.table_oid = oid;
      t.snap.schema_name = r.text(i, 2);
      t.snap.table_name = r.text(i, 3);
      t.relkind = r.text(i, 4).empty() ? 'r' : r.text(i, 4)[0];
      if (!r.is_null(i, 5)) t.snap.row_count_estimate = std::strtoll(r.text(i, 5).c_str(), nullptr, 10);
      out.tables.push_back(std::move(t));
    }
    CapturedTable& t = out.tables[it->second];
    if (std::find(t.target_indexes.begin(), t.target_indexes.end(), target) == t.target_indexes.end())
      t.target_indexes.push_back(target);
    // Rows arrive ordered by target, OID, attnum: the table's first target carries its columns;
    // a NULL attnum is a relation without columns.
    if (r.is_null(i, 6) || t.target_indexes.front() != target) continue;
    ColumnProfile c;
    c.ordinal = std::atoi(r.text(i, 6).c_str());
    c.name = r.text(i, 7);
    c.pg_type = r.text(i, 8);
    t.snap.columns.push_back(std::move(c));
  }
  return out;
}

CatalogResult parse_capture(const PgResult& r, size_t target_count, const ProfileBounds& bounds, bool naive) {
  CatalogResult out = parse_catalog(r, target_count);
  if (r.rows() > 0 && r.columns() > 14 && !r.is_null(0, 14)) out.server = r.text(0, 14);
  std::map<uint32_t, CapturedTable*> by_oid;
  for (auto& t : out.tables) by_oid[t.snap.table_oid] = &t;
  for (int i = 0; i < r.rows(); ++i) {
    if (r.is_null(i, 6) || r.is_null(i, 9)) continue;  // no column, or no statistics for it
    auto it = by_oid.find(static_cast<uint32_t>(std::strtoul(r.text(i, 1).c_str(), nullptr, 10)));
    if (it == by_oid.end()) continue;
    CapturedTable& t = *it->second;
    // Above max_columns a table gets no profile (mark_profile_skipped).
    if (static_cast<int>(t.snap.columns.size()) > bounds.max_columns) continue;
    const int attnum = std::atoi(r.text(i, 6).c_str());
    for (auto& c : t.snap.columns) {
      if (c.ordinal != attnum) continue;
      t.snap.stats_available = true;
      c.null_frac = to_double(r.opt(i, 10));
      c.n_distinct = to_double(r.opt(i, 11));
      c.most_common_vals = r.is_null(i, 12) ? std::vector<std::string>{} : parse_pg_array(r.text(i, 12), bounds, naive);
      c.histogram_sample = r.is_null(i, 13) ? std::vector<std::string>{} : parse_pg_array(r.text(i, 13), bounds, naive);
      break;
    }
  }
  return out;
}

void mark_profile_skipped(std::vector<CapturedTable>& tables, const ProfileBounds& bounds) {
  for (auto& t : tables)
    t.snap.profile_skipped = static_cast<int>(t.snap.columns.size()) > bounds.max_columns;
}

std::optional<BatchQuery> enrich_query(const std::string& user_sql, const std::vector<CapturedTable>& tables) {
  std::string sql = user_sql;
  while (!sql.empty() && (sql.back() == ';' || std::isspace(static_cast<unsigned char>(sql.back())))) sql.pop_back();
  if (sql.empty() || tables.empty()) return std::nullopt;
  // $1/$2 become the LATERAL list's columns, so one round trip serves every table.
  static const std::regex p1(R"(\$1(?![0-9]))"), p2(R"(\$2(?![0-9]))");
  sql = std::regex_replace(sql, p1, "predrop_t.sch");
  sql = std::regex_replace(sql, p2, "predrop_t.tbl");
  std::vector<std::optional<std::string>> schemas, names;
  for (const auto& t : tables) {
    schemas.push_back(t.snap.schema_name);
    names.push_back(t.snap.table_name);
  }
  return BatchQuery{nullptr,
                    "SELECT predrop_t.ord, predrop_e.* FROM unnest($1::text[], $2::text[]) WITH ORDINALITY "
                    "AS predrop_t(sch, tbl, ord) LEFT JOIN LATERAL (" + sql + "\n) predrop_e ON true ORDER BY predrop_t.ord",
                    {pg_array_literal(schemas), pg_array_literal(names)}};
}

void apply_enrichment(const PgResult& r, std::vector<CapturedTable>& tables) {
  auto text = [&](int row, const char* col) -> std::optional<std::string> {
    int c = r.column(col);
    if (c < 0 || r.is_null(row, c)) return std::nullopt;
    return r.text(row, c);
  };
  std::set<int> seen;
  for (int i = 0; i < r.rows(); ++i) {
    int idx = std::atoi(r.text(i, 0).c_str()) - 1;
    if (idx < 0 || static_cast<size_t>(idx) >= tables.size() || !seen.insert(idx).second) continue;  // first row wins
    Enrichment& e = tables[idx].enrich;
    if (auto v = text(i, "resource_identity")) e.resource_identity = v;
    if (auto v = text(i, "version")) {
      char* end = nullptr;
      long n = std::strtol(v->c_str(), &end, 10);
      if (end && *end == '\0' && !v->empty()) e.version = static_cast<int>(n);
    }
    if (auto v = text(i, "parser_version")) e.parser_version = v;
    if (auto v = text(i, "normalization_version")) e.normalization_version = v;
    if (auto v = text(i, "layout_profile")) e.layout_profile = v;
    if (auto v = text(i, "header_quality")) e.header_quality = v;
    if (auto v = text(i, "is_truncated")) e.is_truncated = (*v == "t" || *v == "true" || *v == "1");
  }
}

}  // namespace predrop::capture
