// The evidence commands themselves: each resolves its flags (evidence_support), reads the
// store, and prints text (diff_text), JSON, DDL (ddl) or an HTML page (report_html).
#include "cli/evidence.hpp"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <tuple>

#include "evidence/ages.hpp"
#include "evidence/baseline.hpp"
#include "evidence/drift.hpp"
#include "evidence/rate.hpp"
#include "evidence/retention.hpp"
#include "evidence/store_reader.hpp"
#include "policy/value_text.hpp"
#include "cli/ddl.hpp"
#include "cli/diff_text.hpp"
#include "cli/evidence_support.hpp"
#include "cli/report_html.hpp"
#include "cli/watch.hpp"

namespace predrop::cli {

namespace {

using namespace predrop::capture;
using namespace predrop::evidence;
using nlohmann::json;

void cmd_diff(const Flags& f) {
  auto s = setup("diff", f.c);
  try {
    EvidenceStore store(s.store, s.cfg->store_table);
    std::vector<StoredSnapshot> pair, rows;
    bool paired = false, waiting = false;
    if (!f.resource.empty()) {
      pair = store.latest_of_identity(f.resource);
    } else if (f.refs.size() == 2) {
      for (const auto& id : f.refs) {
        auto snap = store.by_id(id);
        if (!snap) fail("diff", "no snapshot with id " + id);
        pair.push_back(*snap);
      }
    } else if (f.refs.size() == 1) {
      auto [schema, table] = split_qualified(f.refs[0]);
      if (!f.latest) {
        rows = store.table_with_pairs(schema, table);
        auto pairing = find_pairs(rows);
        if (!pairing.pairs.empty()) {
          const auto& cp = pairing.pairs.back();
          pair = {*cp.before, *cp.after};
          paired = true;
          waiting = cp.waiting_for_stats;
        }
      }
      if (pair.empty()) pair = store.latest_of_table(schema, table);
    } else {
      fail("diff", "give two snapshot ids, SCHEMA.TABLE, or --resource IDENTITY", 2);
    }
    if (pair.size() < 2) fail("diff", "fewer than two snapshots to compare");
    const auto &a = pair[0], &b = pair[1];
    if (!a.profile_ok || !b.profile_ok) fail("diff", "a columns_profile could not be read");
    auto v = classify_change(a, b, context_of(a, b), s.diff);
    if (f.c.format == "json") {
      std::cout << json{{"before", snapshot_json(a)}, {"after", snapshot_json(b)}, {"method", to_string(s.diff.method)},
                        {"diff", to_json(v.diff)}, {"verdict", to_json(v)}, {"paired", paired || b.pair_of == a.id},
                        {"waiting_for_stats", waiting}}.dump(2) << "\n";
      finish(0);
    }
    const Paint& p = s.paint;
    auto head = [&](const char* label, const StoredSnapshot& x) {
      std::cout << p.dim(label) << " " << x.schema_name << "." << x.table_name << "  " << short_id(x.id) << "  "
                << x.captured_at << "  " << x.reason << "  " << x.column_count << " columns\n";
    };
    head("before", a);
    head("after ", b);
    if (waiting) std::cout << "  " << p.dim("waiting for statistics: the after has no values profiled yet") << "\n";
    if (!v.diff.schema_changed && v.diff.type_changed.empty() && v.diff.added.empty()) std::cout << "  no column change\n";
    print_diff(std::cout, v.diff, p);
    std::cout << "verdict: " << verdict_text(v, p) << "\n";
  } catch (const CLI::Error&) {
    throw;  // finish(): an exit code, not a failure
  } catch (const std::runtime_error& e) {
    fail("diff", e.what());
  }
  finish(0);
}

void cmd_history(const Flags& f) {
  auto s = setup("history", f.c);
  if (f.refs.size() != 1) fail("history", "give SCHEMA.TABLE", 2);
  auto [schema, table] = split_qualified(f.refs[0]);
  try {
    EvidenceStore store(s.store, s.cfg->store_table);
    auto all = store.table_with_pairs(schema, table);
    std::vector<StoredSnapshot> rows;
    for (const auto& r : all)
      if (r.schema_name == schema && r.table_name == table) rows.push_back(r);
    auto pairing = find_pairs(all);
    const Paint& p = s.paint;
    auto diff_of = [&](const StoredSnapshot& a, const StoredSnapshot& b) -> std::optional<SnapshotDiff> {
      if (!a.profile_ok || !b.profile_ok) return std::nullopt;
      return diff_snapshots(a, b, s.diff);
    };
    // One entry per pair and per unpaired snapshot, in the order their first snapshot was taken.
    struct Entry {
      const StoredSnapshot* first;
      const CompletePair* pair;
    };
    std::vector<Entry> entries;
    for (const auto& cp : pairing.pairs) entries.push_back({cp.before, &cp});
    for (const auto* u : pairing.unpaired) entries.push_back({u, nullptr});
    std::stable_sort(entries.begin(), entries.end(), [](const Entry& x, const Entry& y) {
      return x.first->captured_at < y.first->captured_at || (x.first->captured_at == y.first->captured_at && x.first->id < y.first->id);
    });
    if (f.c.format == "json") {
      json snaps = json::array(), pairs = json::array(), unpaired = json::array();
      for (size_t i = 0; i < rows.size(); ++i) {
        std::optional<SnapshotDiff> d;
        if (i > 0 && rows[i - 1].schema_hash != rows[i].schema_hash) d = diff_of(rows[i - 1], rows[i]);
        json j = snapshot_json(rows[i]);
        j["changed"] = d ? to_json(*d) : json(nullptr);
        snaps.push_back(std::move(j));
      }
      const StoredSnapshot* last = nullptr;
      for (const auto& e : entries) {
        if (!e.pair) {
          json j = snapshot_json(*e.first);
          auto d = last && last->schema_hash != e.first->schema_hash ? diff_of(*last, *e.first) : std::nullopt;
          j["changed_since"] = d ? json(last->id) : json(nullptr);
          j["changed"] = d ? to_json(*d) : json(nullptr);
          unpaired.push_back(std::move(j));
          last = e.first;
          continue;
        }
        last = e.pair->after;
        auto d = diff_of(*e.pair->before, *e.pair->after);
        pairs.push_back({{"before", snapshot_json(*e.pair->before)}, {"after", snapshot_json(*e.pair->after)},
                         {"waiting_for_stats", e.pair->waiting_for_stats}, {"changed", d ? to_json(*d) : json(nullptr)},
                         {"summary", d ? change_summary(*d) : "columns_profile unreadable"}});
      }
      std::cout << json{{"table", schema + "." + table}, {"snapshots", snaps}, {"pairs", pairs}, {"unpaired", unpaired}}.dump(2)
                << "\n";
      finish(0);
    }
    std::cout << p.bold(schema + "." + table) << ": " << rows.size() << " snapshot(s), " << pairing.pairs.size()
              << " pair(s), " << pairing.unpaired.size() << " unpaired\n";
    // An unpaired snapshot (a store before version 2 has only those) says what changed since the
    // shape before it, as a pair does.
    const StoredSnapshot* last = nullptr;
    for (const auto& e : entries) {
      if (!e.pair) {
        const auto& r = *e.first;
        auto d = last && last->schema_hash != r.schema_hash ? diff_of(*last, r) : std::nullopt;
        std::cout << "  " << p.dim("unpaired") << " " << r.reason << " " << r.captured_at << " " << short_id(r.id) << " "
                  << p.dim(r.schema_hash.substr(0, 8)) << "  " << r.column_count << " cols, "
                  << (r.row_count_estimate ? std::to_string(*r.row_count_estimate) : "?") << " rows"
                  << (r.drop_outcome ? ", " + *r.drop_outcome : "")
                  << (d ? "  " + p.cyan("since " + short_id(last->id) + ": " + change_summary(*d)) : "") << "\n";
        last = &r;
        continue;
      }
      last = e.pair->after;
      const auto &b = *e.pair->before, &a = *e.pair->after;
      auto d = diff_of(b, a);
      std::string changed = d ? change_summary(*d) : "columns_profile unreadable";
      std::cout << "  " << b.reason << " " << b.captured_at << " " << short_id(b.id) << " " << p.dim(b.schema_hash.substr(0, 8))
                << " \u2192 " << a.reason << " " << a.captured_at << " " << short_id(a.id) << "  "
                << (changed == "no column change" ? p.dim(changed) : p.cyan(changed))
                << (e.pair->waiting_for_stats ? "  " + p.yellow("(waiting for statistics)") : "")
                << (a.schema_name != b.schema_name || a.table_name != b.table_name
                        ? "  " + p.dim("(" + b.schema_name + "." + b.table_name + " \u2192 " + a.schema_name + "." + a.table_name + ")")
                        : "")
                << "\n";
    }
  } catch (const CLI::Error&) {
    throw;  // finish(): an exit code, not a failure
  } catch (const std::runtime_error& e) {
    fail("history", e.what());
  }
  finish(0);
}


void cmd_ddl(const Flags& f) {
  auto s = setup("ddl", f.c);
  if (f.refs.size() != 1) fail("ddl", "give one snapshot id", 2);
  try {
    EvidenceStore store(s.store, s.cfg->store_table);
    auto snap = store.by_id(f.refs[0]);
    if (!snap) fail("ddl", "no snapshot with id " + f.refs[0]);
    if (!snap->profile_ok) fail("ddl", "the snapshot's columns_profile could not be read");
    auto ddl = create_table_ddl(*snap, f.name);
    if (f.c.format == "json") std::cout << json{{"snapshot", snapshot_json(*snap)}, {"ddl", ddl}}.dump(2) << "\n";
    else std::cout << ddl;
  } catch (const CLI::Error&) {
    throw;  // finish(): an exit code, not a failure
  } catch (const std::runtime_error& e) {
    fail("ddl", e.what());
  }
  finish(0);
}

void cmd_baseline(const Flags& f) {
  auto s = setup("baseline", f.c);
  if (f.target.empty()) fail("baseline", "--target CONNINFO is required", 2);
  BaselineOptions o;
  o.target_conninfo = f.target;
  o.store_conninfo = s.store;
  o.store_table = s.cfg->store_table;
  o.schemas = f.schemas;
  o.limit = f.limit;
  o.batch_size = f.batch;
  o.lanes = f.lanes;
  o.bounds = {s.cfg->profile_max_values, s.cfg->profile_max_value_chars, s.cfg->profile_max_columns};
  o.naive_array_split = s.cfg->naive_array_split;
  o.hash_excluded = s.cfg->hash_excluded;
  o.enrich_identity_sql = s.cfg->enrich_identity_sql;
  o.enrich_provenance_sql = s.cfg->enrich_provenance_sql;
  auto cfg = s.cfg;
  // The policy's tables: those a DROP TABLE would be snapshotted for (kind 0 = drop_table; a quarantine
  // snapshots too), and
  // with --schema every table of those schemas; baseline.exclude either way.
  o.include = [cfg, all = !f.schemas.empty()](const std::string& db, const std::string& schema, const std::string& table) {
    if (cfg->baseline_excludes(schema, table)) return false;
    return all || cfg->decide(db, schema, table, policy::DestroyKind::drop_table).action != policy::Action::skip;
  };
  bool bar = f.c.format == "text" && isatty(STDERR_FILENO);
  if (bar)
    o.progress = [](int done, int total) {
      int width = 40, filled = total ? done * width / total : width;
      std::cerr << "\r[" << std::string(filled, '#') << std::string(width - filled, '.') << "] " << done << "/" << total
                << std::flush;
    };
  try {
    auto r = run_baseline(o);
    if (bar) std::cerr << "\n";
    for (const auto& e : r.errors) std::cerr << "predrop baseline: batch failed: " << e << "\n";
    if (f.c.format == "json") {
      std::cout << json{{"database", r.database}, {"tables", r.tables}, {"candidates", r.candidates},
                        {"captured", r.captured}, {"skipped", r.skipped}, {"remaining", r.remaining},
                        {"seconds", r.seconds}, {"tables_per_s", r.tables_per_s}, {"errors", r.errors}}
                       .dump(2)
                << "\n";
    } else {
      std::cout << "baseline of " << r.database << ": " << r.tables << " tables, " << r.candidates << " candidates, "
                << s.paint.green(std::to_string(r.captured) + " captured") << ", " << r.skipped << " skipped, "
                << r.remaining << " remaining, " << fmt(r.seconds, 2) << " s (" << fmt(r.tables_per_s, 0)
                << " tables/s)\n";
    }
    finish(r.errors.empty() ? 0 : 1);
  } catch (const CLI::Error&) {
    throw;  // finish(): an exit code, not a failure
  } catch (const std::runtime_error& e) {
    fail("baseline", e.what());
  }
}


// The window, plus the befores its afters complete that were captured before it began.
std::vector<StoredSnapshot> with_befores(EvidenceStore& store, std::vector<StoredSnapshot> window) {
  std::set<std::string> have, missing;
  for (const auto& w : window) have.insert(w.id);
  for (const auto& w : window)
    if (w.pair_of && !have.count(*w.pair_of)) missing.insert(*w.pair_of);
  if (missing.empty()) return window;
  for (auto& b : store.by_ids({missing.begin(), missing.end()})) window.push_back(std::move(b));
  std::stable_sort(window.begin(), window.end(), [](const StoredSnapshot& x, const StoredSnapshot& y) {
    return std::tie(x.schema_name, x.table_name, x.captured_at, x.id) < std::tie(y.schema_name, y.table_name, y.captured_at, y.id);
  });
  return window;
}

void print_counts(const json& obj, const std::string& title) {
  std::cout << title << ":";
  if (obj.empty()) std::cout << " none";
  for (auto it = obj.begin(); it != obj.end(); ++it) std::cout << " " << it.key() << "=" << it.value().dump();
  std::cout << "\n";
}

// "12 seen, 3 changed shape (25%)"
std::string seen_changed(const json& t) {
  return t["tables_seen"].dump() + " seen, " + t["tables_changed_shape"].dump() + " changed shape (" +
         std::to_string(static_cast<int>(t["share_changed"].get<double>() * 100 + 0.5)) + "%)";
}

void print_rate(const Paint& p, const json& rate) {
  const auto& o = rate["overall"];
  std::cout << p.bold("rate of change") << ": ";
  if (o["tables_seen"] == 0) {
    std::cout << "no table seen recreated or altered in the window\n";
    return;
  }
  std::cout << o["tables_seen"] << " table(s) seen recreated or altered, " << o["tables_changed_shape"] << " changed shape ("
            << static_cast<int>(o["share_changed"].get<double>() * 100 + 0.5) << "%): " << o["added"] << " added a column, "
            << o["removed"] << " removed one, " << o["renamed"] << " renamed one, " << o["type_changed"] << " changed a type\n";
  for (const auto& [schema, t] : rate["by_schema"].items()) std::cout << "  schema " << schema << ": " << seen_changed(t) << "\n";
  std::cout << "  weekly (week of, tables seen / changed shape):";
  for (const auto& w : rate["weekly"])
    std::cout << " " << w["week"].get<std::string>() << " " << w["tables_seen"] << "/" << w["tables_changed_shape"];
  std::cout << "\n";
}

void cmd_report(const Flags& f) {
  auto s = setup("report", f.c);
  if (f.c.format == "html" && f.output.empty()) fail("report", "--format html needs --output FILE", 2);
  try {
    EvidenceStore store(s.store, s.cfg->store_table);
    auto window = with_befores(store, store.window(f.days));
    auto versioned = store.versioned();
    auto pairs = pair_and_classify(window, versioned, s.diff);
    json r = drift_report_json(window, pairs, f.days);
    r["method"] = to_string(s.diff.method);
    // The weeks end on the store server's today: the window is its now() less the days.
    std::string today = store.session().exec("SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD')").text(0, 0);
    r["rate"] = change_rate_json(pairs, f.days, today);
    if (f.c.format == "html") {
      std::ofstream out(f.output);
      out << render_report_html(r, window, pairs);
      if (!out) fail("report", "cannot write " + f.output);
      std::cout << "wrote " << f.output << "\n";
      finish(0);
    }
    std::string text = f.c.format == "json" ? r.dump(2) : "";
    if (!f.output.empty()) {
      std::ofstream(f.output) << (f.c.format == "json" ? text : r.dump(2)) << "\n";
    }
    if (f.c.format == "json") {
      std::cout << text << "\n";
      finish(0);
    }
    const Paint& p = s.paint;
    const auto& cov = r["coverage"];
    std::cout << p.bold("drift report, last " + std::to_string(f.days) + " days") << " (shadow)\n";
    std::cout << "coverage: " << cov["snapshots"] << " snapshots of " << cov["tables"] << " tables, " << cov["with_stats"]
              << " with stats, " << cov["with_provenance"] << " with provenance";
    if (!cov["first_seen"].is_null())
      std::cout << ", " << cov["first_seen"].get<std::string>() << " .. " << cov["last_seen"].get<std::string>();
    std::cout << "\n";
    std::cout << "before/after pairs: " << r["complete_pairs"] << " complete (" << r["pairs_waiting_for_stats"]
              << " waiting for statistics), " << r["unpaired_snapshots"] << " unpaired snapshot(s)\n";
    print_rate(p, r["rate"]);
    if (r["pairs_found"] == 0) {
      std::cout << "no pairs: nothing is comparable until a table is captured twice\n";
      finish(0);
    }
    print_counts(r["pairs_by_kind"], "pairs by kind");
    print_counts(r["by_verdict"], "verdicts");
    print_counts(r["exonerated_by_gate"], "exonerated by gate");
    print_counts(r["actionable_by_class"], "actionable by class");
    if (r["actionable"] > 0) std::cout << p.red(r["actionable"].dump() + " change(s) survived every gate") << "\n";
    const auto& changes = r["changes"];
    std::cout << "\n" << p.bold("changes") << " (" << changes.size() << ", whatever the verdict):" << (changes.empty() ? " none" : "") << "\n";
    for (const auto& c : changes) {
      std::string verdict = c["verdict"].get<std::string>();
      if (!c["change_class"].is_null()) verdict += " (" + c["change_class"].get<std::string>() + ")";
      std::cout << "  " << p.bold(c["table"].get<std::string>()) << "  " << c["pair_kind"].get<std::string>() << "  "
                << (verdict.rfind("unexplained", 0) == 0 ? p.red(verdict) : verdict) << "  "
                << p.dim(short_id(c["before_id"]) + " \u2192 " + short_id(c["after_id"])) << "  " << change_summary(c) << "\n";
    }
    if (r["changes_left_off"] > 0) std::cout << "  \u2026 and " << r["changes_left_off"] << " more (--format json lists at most 500)\n";
    if (!r["gates_not_evaluated"].empty()) {
      std::vector<std::string> g;
      for (auto it = r["gates_not_evaluated"].begin(); it != r["gates_not_evaluated"].end(); ++it)
        g.push_back(it.key() + " (" + it.value().dump() + " of them)");
      std::cout << p.dim("gates not evaluated for these pairs: " + join(g)) << "\n";
    }
  } catch (const CLI::Error&) {
    throw;  // finish(): an exit code, not a failure
  } catch (const std::runtime_error& e) {
    fail("report", e.what());
  }
  finish(0);
}

void cmd_ages(const Flags& f) {
  auto s = setup("ages", f.c);
  if (f.days < 1) fail("ages", "--days must be at least 1", 2);
  try {
    EvidenceStore store(s.store, s.cfg->store_table);
    evidence::AgesQuery q;
    if (!f.database.empty()) q.database = f.database;
    if (!f.schema.empty()) q.schema = f.schema;
    q.window_days = f.days;
    auto ages = evidence::table_ages(store.session(), s.cfg->store_table, q);
    if (f.c.format == "json") {
      json out = json::array();
      for (const auto& a : ages)
        out.push_back({{"database", a.database}, {"schema", a.schema}, {"table", a.table}, {"since", a.since},
                       {"since_from", a.since_from}, {"at_least", a.at_least}, {"age_s", a.age_s},
                       {"versions_in_window", a.versions_in_window}, {"shapes_in_window", a.shapes_in_window},
                       {"last_seen", a.last_seen}, {"window_days", f.days}});
      std::cout << out.dump(2) << "\n";
      finish(0);
    }
    const Paint& p = s.paint;
    if (ages.empty()) std::cout << "no table in the store" << (q.database || q.schema ? " matches" : "") << "\n";
    for (const auto& a : ages) {
      std::string when = (a.at_least ? "at least " : "") + human_age(a.age_s) + " old";
      std::cout << (a.database.empty() ? "" : a.database + "  ") << p.bold(a.schema + "." + a.table) << "  " << when
                << "  since " << a.since << " (" << a.since_from << ")  " << a.versions_in_window << " version"
                << (a.versions_in_window == 1 ? "" : "s") << " and " << a.shapes_in_window << " shape"
                << (a.shapes_in_window == 1 ? "" : "s") << " in " << f.days << " days\n";
    }
  } catch (const CLI::Error&) {
    throw;
  } catch (const std::runtime_error& e) {
    fail("ages", e.what());
  }
  finish(0);
}

}  // namespace

json prune_json(const evidence::PruneCounts& c, int64_t retention_s, bool dry_run) {
  return {{"snapshots", c.snapshots},
          {"store_bytes", c.store_bytes},
          {"bytes_per_snapshot", c.snapshots ? c.store_bytes / c.snapshots : 0},
          {"retention_s", retention_s},
          {"older", c.older},
          {"kept", {{"newest_pair", c.kept_newest_pair}, {"first_of_shape", c.kept_first_of_shape},
                    {"newest", c.kept_newest}, {"quarantine", c.kept_quarantine}}},
          {"prunable", c.prunable},
          {"pruned", c.pruned},
          {"dry_run", dry_run}};
}

void print_prune(const evidence::PruneCounts& c, int64_t retention_s, bool dry_run, bool stats) {
  std::cout << c.snapshots << " snapshots, " << c.store_bytes << " bytes with indexes and TOAST ("
            << (c.snapshots ? c.store_bytes / c.snapshots : 0) << " a snapshot)\n";
  if (retention_s <= 0) {
    std::cout << "store.retention is off: nothing is pruned\n";
    return;
  }
  std::cout << c.older << " older than " << policy::detail::format_duration_s(retention_s) << "; of those kept: "
            << c.kept_newest_pair << " in a table's newest complete pair, " << c.kept_first_of_shape
            << " the first of a shape, " << c.kept_newest << " a table's newest, " << c.kept_quarantine
            << " named by a quarantine\n";
  if (stats || dry_run) std::cout << c.prunable << " would be pruned\n";
  else std::cout << c.pruned << " pruned" << (c.pruned < c.prunable ? " (of " + std::to_string(c.prunable) + "; the rest next run)" : "") << "\n";
}

void cmd_store(const Flags& f, const std::string& what) {
  const std::string cmd = "store " + what;
  auto s = setup(cmd, f.c);
  int64_t retention_s = s.cfg->store_retention_s;
  if (!f.retention.empty()) {
    auto v = policy::detail::parse_duration_s(f.retention);
    if (!v || *v < 1) fail(cmd, "--retention: expected a duration like 180d, 36h or seconds, got '" + f.retention + "'", 2);
    retention_s = *v;
  }
  if (what == "prune" && retention_s <= 0)
    fail(cmd, "store.retention is off (0): set it in the config or pass --retention", 2);
  try {
    const bool dry_run = what == "stats" || f.dry_run;
    // Counting reads only; a prune deletes, in a session of its own kind.
    PgSession store(s.store, "predrop-store", dry_run ? "-c default_transaction_read_only=on" : "");
    evidence::PruneCounts c;
    if (retention_s > 0) {
      evidence::PruneOptions o;
      o.retention_s = retention_s;
      o.dry_run = dry_run;
      c = evidence::prune_store(store, s.cfg->store_table, o);
      if (c.locked_out) fail(cmd, "another predrop is pruning this store now; try again later");
    } else {
      const auto size = evidence::store_size(store, s.cfg->store_table);
      c.snapshots = size.snapshots;
      c.store_bytes = size.bytes;
    }
    if (f.c.format == "json") {
      std::cout << prune_json(c, retention_s, what == "stats" || f.dry_run).dump(2) << "\n";
      finish(0);
    }
    print_prune(c, retention_s, f.dry_run, what == "stats");
  } catch (const CLI::Error&) {
    throw;
  } catch (const std::runtime_error& e) {
    fail(cmd, e.what());
  }
  finish(0);
}

void register_evidence_commands(CLI::App& app) {
  auto f = std::make_shared<Flags>();

  auto* baseline = app.add_subcommand("baseline", "snapshot live tables whose latest snapshot's columns differ (read-only)");
  add_common(baseline, f->c, false);
  baseline->add_option("--target", f->target, "libpq conninfo of the database to read (read-only)")->required();
  baseline->add_option("--schema", f->schemas, "only these schemas (default: the policy's)");
  baseline->add_option("--limit", f->limit, "capture at most N tables this run");
  baseline->add_option("--batch-size", f->batch, "tables per catalog read and store write");
  baseline->add_option("--lanes", f->lanes, "batches in flight, each on its own target and store connection (1)")
      ->check(CLI::Range(1, 16));
  baseline->callback([f] { cmd_baseline(*f); });

  auto* diff = app.add_subcommand("diff", "diff two snapshots and classify the change");
  add_common(diff, f->c, true);
  diff->add_option("refs", f->refs, "ID_A ID_B, or SCHEMA.TABLE for its latest before/after pair (or latest two)")->expected(0, 2);
  diff->add_option("--resource", f->resource, "the latest two snapshots of this resource identity");
  diff->add_flag("--latest", f->latest, "SCHEMA.TABLE: its latest two snapshots, not its latest before/after pair");
  diff->callback([f] { cmd_diff(*f); });

  auto* history = app.add_subcommand("history", "a table's before/after pairs and unpaired snapshots, in time order");
  add_common(history, f->c, true);
  history->add_option("table", f->refs, "SCHEMA.TABLE")->expected(1);
  history->callback([f] { cmd_history(*f); });

  auto* report = app.add_subcommand("report", "pair consecutive snapshots, classify each pair, summarise");
  add_common(report, f->c, true);
  report->add_option("--days", f->days, "window for same-table pairs (30)");
  report->add_option("--output", f->output, "write the report to FILE (required for --format html)");
  report->callback([f] { cmd_report(*f); });

  auto* ddl = app.add_subcommand("ddl", "CREATE TABLE recreating a snapshot's shape");
  add_common(ddl, f->c, false);
  ddl->add_option("id", f->refs, "snapshot id")->expected(1);
  ddl->add_option("--name", f->name, "create as [SCHEMA.]TABLE instead of the captured name");
  ddl->callback([f] { cmd_ddl(*f); });

  auto* ages = app.add_subcommand("ages", "each table's current version: since when, how old, how many versions lately");
  add_common(ages, f->c, false);
  ages->add_option("--database", f->database, "only this database");
  ages->add_option("--schema", f->schema, "only this schema");
  ages->add_option("--days", f->days, "window for the versions and shapes counted (30)");
  ages->callback([f] { cmd_ages(*f); });

  auto* store = app.add_subcommand("store", "the snapshot store itself: its size, and pruning by store.retention");
  store->require_subcommand(1);
  auto* stats = store->add_subcommand("stats", "rows, bytes, bytes per snapshot, and what store.retention would prune");
  add_common(stats, f->c, false);
  stats->add_option("--retention", f->retention, "count against this retention instead of store.retention (180d)");
  stats->callback([f] { cmd_store(*f, "stats"); });
  auto* prune = store->add_subcommand("prune", "delete snapshots older than store.retention that nothing needs");
  add_common(prune, f->c, false);
  prune->add_option("--retention", f->retention, "this retention instead of store.retention (180d)");
  prune->add_flag("--dry-run", f->dry_run, "count what would be pruned; delete nothing");
  prune->callback([f] { cmd_store(*f, "prune"); });

  register_watch_command(app);
}

}  // namespace predrop::cli
