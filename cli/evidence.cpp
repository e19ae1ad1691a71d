#include "cli/evidence.hpp"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "capture/baseline.hpp"
#include "capture/classify.hpp"
#include "capture/evidence_store.hpp"
#include "policy/policy.hpp"

namespace predrop::cli {

namespace {

using namespace predrop::capture;
using nlohmann::json;

struct Common {
  std::string store, config, format = "text", method = "reference";
  double threshold = 0.6, max_null_frac = 0.95;
  int min_values = 4;
};

struct Flags {
  Common c;
  std::vector<std::string> refs, schemas;
  std::string resource, target, output, name;
  int limit = 0, batch = 500, days = 30;
};

[[noreturn]] void finish(int code) { throw CLI::RuntimeError(code); }
[[noreturn]] void fail(const std::string& cmd, const std::string& msg, int code = 1) {
  std::cerr << "predrop " << cmd << ": " << msg << "\n";
  finish(code);
}

// Colour only for a terminal, and never when NO_COLOR is set.
struct Paint {
  bool on = false;
  std::string operator()(const char* code, const std::string& s) const { return on ? std::string("\033[") + code + "m" + s + "\033[0m" : s; }
  std::string green(const std::string& s) const { return (*this)("32", s); }
  std::string red(const std::string& s) const { return (*this)("31", s); }
  std::string yellow(const std::string& s) const { return (*this)("33", s); }
  std::string cyan(const std::string& s) const { return (*this)("36", s); }
  std::string bold(const std::string& s) const { return (*this)("1", s); }
  std::string dim(const std::string& s) const { return (*this)("2", s); }
};

void add_common(CLI::App* sub, Common& c, bool with_diff_options) {
  sub->add_option("--store", c.store, "libpq conninfo of the snapshot store (default: the config's store.conninfo)");
  sub->add_option("--config", c.config, "YAML config file");
  sub->add_option("--format", c.format, "text or json")->check(CLI::IsMember({"text", "json", "html"}));
  if (!with_diff_options) return;
  sub->add_option("--rename-method,--method", c.method,
                  "rename matcher: reference (openarg §5, the default) or profile (alias profile+: tolerates value drift)")
      ->check(CLI::IsMember({"reference", "profile", "profile+"}));
  sub->add_option("--threshold", c.threshold, "rename similarity threshold (0.6)");
  sub->add_option("--min-values", c.min_values, "identifiability: meaningful values needed (4)");
  sub->add_option("--max-null-frac", c.max_null_frac, "identifiability: highest null fraction (0.95)");
}

struct Setup {
  std::shared_ptr<const policy::Config> cfg;
  std::string store;
  DiffOptions diff;
  Paint paint;
};

Setup setup(const std::string& cmd, const Common& c) {
  auto loaded = c.config.empty() ? policy::load_defaults() : policy::load_file(c.config);
  if (!loaded.errors.empty()) {
    for (const auto& e : loaded.errors) std::cerr << e.to_string() << "\n";
    finish(2);
  }
  Setup s{loaded.config, c.store.empty() ? loaded.config->store_conninfo : c.store, {}, {}};
  if (s.store.empty()) fail(cmd, "--store CONNINFO (or store.conninfo in the config) is required", 2);
  s.diff.rename_threshold = c.threshold;
  s.diff.min_identifiable_values = c.min_values;
  s.diff.max_identifiable_null_frac = c.max_null_frac;
  s.diff.method = *rename_method_from_string(c.method);
  s.diff.hash_excluded = s.cfg->hash_excluded;
  s.paint.on = c.format == "text" && isatty(STDOUT_FILENO) && !std::getenv("NO_COLOR");
  return s;
}

std::string fmt(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string short_id(const std::string& id) { return id.substr(0, 8); }

std::string join(const std::vector<std::string>& v, const std::string& sep = ", ") {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

DriftContext context_of(const StoredSnapshot& a, const StoredSnapshot& b) {
  DriftContext ctx;
  if (a.resource_identity && b.resource_identity) ctx.same_identity = *a.resource_identity == *b.resource_identity;
  return ctx;
}

json snapshot_json(const StoredSnapshot& s) {
  return {{"id", s.id},
          {"schema_name", s.schema_name},
          {"table_name", s.table_name},
          {"captured_at", s.captured_at},
          {"reason", s.reason},
          {"drop_outcome", s.drop_outcome ? json(*s.drop_outcome) : json(nullptr)},
          {"column_count", s.column_count},
          {"row_count_estimate", s.row_count_estimate ? json(*s.row_count_estimate) : json(nullptr)},
          {"schema_hash", s.schema_hash},
          {"resource_identity", s.resource_identity ? json(*s.resource_identity) : json(nullptr)},
          {"version", s.version ? json(*s.version) : json(nullptr)}};
}

// One line per change, the way a reviewer reads a diff: + added, - removed, ~ retyped, → renamed.
void print_diff(std::ostream& out, const SnapshotDiff& d, const Paint& p, const std::string& indent = "  ") {
  std::set<std::string> renamed_from, renamed_to;
  for (const auto& r : d.renamed_candidates) {
    renamed_from.insert(r.from);
    renamed_to.insert(r.to);
  }
  for (const auto& r : d.renamed_candidates)
    out << indent << p.cyan(r.from + " \u2192 " + r.to + " (" + fmt(r.similarity, 2) + ")") << "\n";
  for (const auto& a : d.added)
    if (!renamed_to.count(a)) out << indent << p.green("+ " + a) << "\n";
  for (const auto& r : d.removed)
    if (!renamed_from.count(r)) out << indent << p.red("- " + r) << "\n";
  for (const auto& t : d.type_changed) out << indent << p.yellow("~ " + t.column + ": " + t.from + " \u2192 " + t.to) << "\n";
  for (const auto& a : d.ambiguous_renames) {
    std::vector<std::string> c;
    for (const auto& k : a.candidates) c.push_back(k.to + " (" + fmt(k.similarity, 2) + ")");
    out << indent << p.yellow("? " + a.from + " \u2192 one of " + join(c)) << "  " << p.dim("ambiguous: not guessed") << "\n";
  }
  if (!d.provenance_changed.empty()) out << indent << p.dim("provenance changed: " + join(d.provenance_changed)) << "\n";
}

std::string verdict_text(const DriftVerdict& v, const Paint& p) {
  std::string s = v.verdict;
  if (!v.change_class.empty()) s += " (" + v.change_class + ")";
  if (!v.exonerated_by.empty()) s += " by " + v.exonerated_by;
  s = v.is_actionable ? p.bold(p.red(s)) : p.bold(s);
  s += " \u2014 " + v.reason;
  if (!v.gates_not_evaluated.empty()) s += p.dim(" [not evaluated: " + join(v.gates_not_evaluated) + "]");
  return s;
}

void cmd_diff(const Flags& f) {
  auto s = setup("diff", f.c);
  try {
    EvidenceStore store(s.store, s.cfg->store_table);
    std::vector<StoredSnapshot> pair;
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
      pair = store.latest_of_table(schema, table);
    } else {
      fail("diff", "give two snapshot ids, SCHEMA.TABLE, or --resource IDENTITY", 2);
    }
    if (pair.size() < 2) fail("diff", "fewer than two snapshots to compare");
    const auto &a = pair[0], &b = pair[1];
    if (!a.profile_ok || !b.profile_ok) fail("diff", "a columns_profile could not be read");
    auto v = classify_change(a, b, context_of(a, b), s.diff);
    if (f.c.format == "json") {
      std::cout << json{{"before", snapshot_json(a)}, {"after", snapshot_json(b)}, {"method", f.c.method},
                        {"diff", to_json(v.diff)}, {"verdict", to_json(v)}}.dump(2) << "\n";
      finish(0);
    }
    const Paint& p = s.paint;
    auto head = [&](const char* label, const StoredSnapshot& x) {
      std::cout << p.dim(label) << " " << x.schema_name << "." << x.table_name << "  " << short_id(x.id) << "  "
                << x.captured_at << "  " << x.reason << "  " << x.column_count << " columns\n";
    };
    head("before", a);
    head("after ", b);
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
    auto rows = store.history(schema, table);
    json out = json::array();
    const Paint& p = s.paint;
    if (f.c.format == "text") std::cout << p.bold(schema + "." + table) << ": " << rows.size() << " snapshot(s)\n";
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto& r = rows[i];
      std::optional<SnapshotDiff> d;
      if (i > 0 && rows[i - 1].schema_hash != r.schema_hash && rows[i - 1].profile_ok && r.profile_ok)
        d = diff_snapshots(rows[i - 1], r, s.diff);
      if (f.c.format == "json") {
        json j = snapshot_json(r);
        j["changed"] = d ? to_json(*d) : json(nullptr);
        out.push_back(std::move(j));
        continue;
      }
      std::cout << "  " << r.captured_at << "  " << short_id(r.id) << "  " << r.reason << "  "
                << (r.drop_outcome ? *r.drop_outcome : "-") << "  " << r.column_count << " cols  "
                << (r.row_count_estimate ? std::to_string(*r.row_count_estimate) : "?") << " rows  "
                << p.dim(r.schema_hash.substr(0, 8)) << "\n";
      if (d) print_diff(std::cout, *d, p, "      ");
    }
    if (f.c.format == "json") std::cout << json{{"table", schema + "." + table}, {"snapshots", out}}.dump(2) << "\n";
  } catch (const CLI::Error&) {
    throw;  // finish(): an exit code, not a failure
  } catch (const std::runtime_error& e) {
    fail("history", e.what());
  }
  finish(0);
}

// PostgreSQL's keywords that quote_ident() quotes (every category but unreserved), PG 15.
const std::set<std::string>& quoted_keywords() {
  static const std::set<std::string> k = [] {
    std::istringstream in(
        "all analyse analyze and any array as asc asymmetric authorization between bigint binary bit boolean both "
        "case cast char character check coalesce collate collation column concurrently constraint create cross "
        "current_catalog current_date current_role current_schema current_time current_timestamp current_user dec "
        "decimal default deferrable desc distinct do else end except exists extract false fetch float for foreign "
        "freeze from full grant greatest group grouping having ilike in initially inner inout int integer intersect "
        "interval into is isnull join lateral leading least left like limit localtime localtimestamp national "
        "natural nchar none normalize not notnull null nullif numeric offset on only or order out outer overlaps "
        "overlay placing position precision primary real references returning right row select session_user setof "
        "similar smallint some substring symmetric table tablesample then time timestamp to trailing treat trim "
        "true union unique user using values varchar variadic verbose when where window with xmlattributes "
        "xmlconcat xmlelement xmlexists xmlforest xmlnamespaces xmlparse xmlpi xmlroot xmlserialize xmltable");
    std::set<std::string> s;
    for (std::string w; in >> w;) s.insert(w);
    return s;
  }();
  return k;
}

}  // namespace

// Quoted only where needed, exactly as the server's quote_ident() decides.
std::string quote_ident_if_needed(const std::string& name) {
  bool safe = !name.empty() && ((name[0] >= 'a' && name[0] <= 'z') || name[0] == '_');
  for (char ch : name) safe = safe && ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_');
  if (safe && !quoted_keywords().count(name)) return name;
  std::string out = "\"";
  for (char ch : name) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}

std::string create_table_ddl(const StoredSnapshot& s, const std::string& name_override) {
  std::string name = quote_ident_if_needed(s.schema_name) + "." + quote_ident_if_needed(s.table_name);
  if (!name_override.empty()) {
    auto [schema, table] = split_qualified(name_override, s.schema_name);
    name = quote_ident_if_needed(schema) + "." + quote_ident_if_needed(table);
  }
  std::vector<const ColumnProfile*> cols;
  for (const auto& c : s.columns) cols.push_back(&c);
  std::stable_sort(cols.begin(), cols.end(), [](auto* a, auto* b) { return a->ordinal < b->ordinal; });
  std::string out = "-- recreates the shape of snapshot " + s.id + " (" + s.captured_at + ", " + s.reason + ")\n";
  out += "CREATE TABLE " + name + " (";
  for (size_t i = 0; i < cols.size(); ++i)
    out += std::string(i ? "," : "") + "\n  " + quote_ident_if_needed(cols[i]->name) + " " + cols[i]->pg_type;
  return out + (cols.empty() ? ");\n" : "\n);\n");
}

namespace {

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
  o.bounds = {s.cfg->profile_max_values, s.cfg->profile_max_value_chars, s.cfg->profile_max_columns};
  o.naive_array_split = s.cfg->naive_array_split;
  o.hash_excluded = s.cfg->hash_excluded;
  o.enrich_identity_sql = s.cfg->enrich_identity_sql;
  o.enrich_provenance_sql = s.cfg->enrich_provenance_sql;
  auto cfg = s.cfg;
  // The policy's tables: those a DROP TABLE would be snapshotted for (kind 0 = drop_table).
  if (f.schemas.empty())
    o.include = [cfg](const std::string& db, const std::string& schema, const std::string& table) {
      return cfg->decide(db, schema, table, 0).action == policy::Action::snapshot;
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

}  // namespace

namespace {

std::string esc(const std::string& s) {
  std::string o;
  for (char ch : s) {
    switch (ch) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += ch;
    }
  }
  return o;
}

std::string counts_table(const json& obj, const std::string& title) {
  std::string o = "<table><caption>" + esc(title) + "</caption>";
  if (obj.empty()) o += "<tr><td colspan=2 class=muted>none</td></tr>";
  for (auto it = obj.begin(); it != obj.end(); ++it) o += "<tr><th>" + esc(it.key()) + "</th><td>" + esc(it.value().dump()) + "</td></tr>";
  return o + "</table>";
}

// One table's shapes as an SVG grid: columns as rows, snapshots as columns; a cell is filled
// when the snapshot has the column (green when it appeared there), a dashed red outline where
// it disappeared; renames are curves from the old row to the new one.
std::string timeline_svg(const std::vector<const StoredSnapshot*>& snaps, const std::map<std::pair<std::string, std::string>, const PairVerdict*>& by_ids) {
  std::vector<std::string> rows;
  std::map<std::string, int> row_of;
  for (const auto* s : snaps) {
    auto cols = s->columns;
    std::stable_sort(cols.begin(), cols.end(), [](const auto& a, const auto& b) { return a.ordinal < b.ordinal; });
    for (const auto& c : cols)
      if (row_of.emplace(c.name, static_cast<int>(rows.size())).second) rows.push_back(c.name);
  }
  const int L = 190, W = 150, H = 22, top = 44;
  int width = L + W * static_cast<int>(snaps.size()) + 10, height = top + H * static_cast<int>(rows.size()) + 10;
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << width << "' height='" << height << "' viewBox='0 0 " << width << " " << height << "'>";
  for (size_t i = 0; i < rows.size(); ++i)
    o << "<text class='col' x='4' y='" << top + H * i + 15 << "'>" << esc(clip_chars(rows[i], 26)) << "</text>";
  for (size_t j = 0; j < snaps.size(); ++j) {
    const auto* s = snaps[j];
    int x = L + W * static_cast<int>(j);
    o << "<text class='head' x='" << x + 10 << "' y='16'>" << esc(s->id.substr(0, 8) + " " + s->reason) << "</text>";
    o << "<text class='sub' x='" << x + 10 << "' y='32'>" << esc(s->captured_at.substr(0, 16)) << "</text>";
    std::set<std::string> prev;
    if (j > 0)
      for (const auto& c : snaps[j - 1]->columns) prev.insert(c.name);
    std::set<std::string> here;
    for (const auto& c : s->columns) {
      here.insert(c.name);
      int y = top + H * row_of[c.name];
      o << "<rect class='" << (j > 0 && !prev.count(c.name) ? "new" : "cell") << "' x='" << x + 10 << "' y='" << y + 3
        << "' width='" << W - 20 << "' height='" << H - 6 << "' rx='3'><title>" << esc(c.name + " " + c.pg_type) << "</title></rect>";
      o << "<text class='type' x='" << x + 14 << "' y='" << y + 15 << "'>" << esc(clip_chars(c.pg_type, 20)) << "</text>";
    }
    for (const auto& n : prev)
      if (!here.count(n))
        o << "<rect class='gone' x='" << x + 10 << "' y='" << top + H * row_of[n] + 3 << "' width='" << W - 20 << "' height='" << H - 6 << "' rx='3'/>";
    if (j == 0) continue;
    auto it = by_ids.find({snaps[j - 1]->id, s->id});
    if (it == by_ids.end() || !it->second->evaluated) continue;
    for (const auto& r : it->second->verdict.diff.renamed_candidates) {
      int y1 = top + H * row_of[r.from] + H / 2, y2 = top + H * row_of[r.to] + H / 2;
      int x1 = x - 10, x2 = x + 10;
      o << "<path class='rename' d='M" << x1 - W + 20 << " " << y1 << " C" << x1 + 5 << " " << y1 << " " << x2 - 15 << " " << y2 << " " << x2 << " " << y2
        << "'><title>" << esc(r.from + " \u2192 " + r.to + " (" + fmt(r.similarity, 2) + ")") << "</title></path>";
      o << "<text class='sim' x='" << x - 8 << "' y='" << (y1 + y2) / 2 - 3 << "'>" << fmt(r.similarity, 2) << "</text>";
    }
  }
  o << "</svg>";
  return o.str();
}

}  // namespace

// Self-contained: inline CSS and SVG, no script, no external resource.
std::string render_report_html(const json& r, const std::vector<StoredSnapshot>& window, const std::vector<PairVerdict>& pairs) {
  std::ostringstream o;
  o << "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>predrop drift report</title><style>"
       "body{font:14px system-ui,sans-serif;margin:24px;color:#1d2330;background:#fafbfc}h1{font-size:22px}"
       "table{border-collapse:collapse;margin:0 16px 16px 0;display:inline-table;vertical-align:top;background:#fff}"
       "caption{font-weight:600;text-align:left;padding:4px 0}th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left}"
       ".muted{color:#8b949e}.actionable{color:#b42318;font-weight:600}section{margin:24px 0;overflow-x:auto}"
       "svg{background:#fff;border:1px solid #d0d7de}.col{font:12px monospace;fill:#1d2330}.head{font:600 12px sans-serif;fill:#1d2330}"
       ".sub,.sim{font:11px sans-serif;fill:#57606a}.type{font:11px monospace;fill:#1d2330}.cell{fill:#dbe7f5}"
       ".new{fill:#b7e4c7}.gone{fill:none;stroke:#d1242f;stroke-dasharray:4 3}.rename{fill:none;stroke:#8250df;stroke-width:2}"
       "</style></head><body>";
  o << "<h1>predrop drift report</h1><p class=muted>last " << r["window_days"] << " days, mode " << esc(r["mode"].get<std::string>())
    << ", rename method " << esc(r.value("method", "reference")) << "</p>";
  if (r["actionable"] > 0) o << "<p class=actionable>" << r["actionable"] << " change(s) survived every gate</p>";
  json cov = r["coverage"];
  for (auto& [k, v] : cov.items()) if (v.is_null()) v = "-";
  o << "<section>" << counts_table(cov, "coverage") << counts_table(r["pairs_by_kind"], "pairs by kind")
    << counts_table(r["by_verdict"], "verdicts") << counts_table(r["exonerated_by_gate"], "exonerations by gate")
    << counts_table(r["actionable_by_class"], "actionable by class") << "</section>";
  o << "<section><table><caption>examples (at most 20)</caption><tr><th>table</th><th>kind</th><th>class</th><th>added</th><th>removed</th><th>renamed</th></tr>";
  if (r["examples"].empty()) o << "<tr><td colspan=6 class=muted>no actionable change</td></tr>";
  for (const auto& ex : r["examples"]) {
    std::vector<std::string> ren;
    for (const auto& rc : ex["renamed_candidates"]) ren.push_back(rc["from"].get<std::string>() + " \u2192 " + rc["to"].get<std::string>());
    o << "<tr><td>" << esc(ex["table"]) << "</td><td>" << esc(ex["pair_kind"]) << "</td><td>" << esc(ex["change_class"])
      << "</td><td>" << esc(join(ex["added"].get<std::vector<std::string>>())) << "</td><td>" << esc(join(ex["removed"].get<std::vector<std::string>>()))
      << "</td><td>" << esc(join(ren)) << "</td></tr>";
  }
  o << "</table></section>";
  std::map<std::pair<std::string, std::string>, const PairVerdict*> by_ids;
  for (const auto& p : pairs) by_ids[{p.before->id, p.after->id}] = &p;
  // Timelines: tables with at least two snapshots, at most 50 tables and their last 12 shapes.
  std::map<std::string, std::vector<const StoredSnapshot*>> by_table;
  for (const auto& s : window) by_table[s.schema_name + "." + s.table_name].push_back(&s);
  int shown = 0;
  o << "<h2>timelines</h2>";
  for (auto& [name, snaps] : by_table) {
    if (snaps.size() < 2 || ++shown > 50) continue;
    if (snaps.size() > 12) snaps.erase(snaps.begin(), snaps.end() - 12);
    o << "<section><h3>" << esc(name) << "</h3>" << timeline_svg(snaps, by_ids) << "</section>";
  }
  if (shown == 0) o << "<p class=muted>no table captured twice in the window</p>";
  o << "</body></html>\n";
  return o.str();
}

namespace {

void print_counts(const json& obj, const std::string& title) {
  std::cout << title << ":";
  if (obj.empty()) std::cout << " none";
  for (auto it = obj.begin(); it != obj.end(); ++it) std::cout << " " << it.key() << "=" << it.value().dump();
  std::cout << "\n";
}

void cmd_report(const Flags& f) {
  auto s = setup("report", f.c);
  if (f.c.format == "html" && f.output.empty()) fail("report", "--format html needs --output FILE", 2);
  try {
    EvidenceStore store(s.store, s.cfg->store_table);
    auto window = store.window(f.days);
    auto versioned = store.versioned();
    auto pairs = pair_and_classify(window, versioned, s.diff);
    json r = drift_report_json(window, pairs, f.days);
    r["method"] = f.c.method;
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
    if (r["pairs_found"] == 0) {
      std::cout << "no pairs: nothing is comparable until a table is captured twice\n";
      finish(0);
    }
    print_counts(r["pairs_by_kind"], "pairs by kind");
    print_counts(r["by_verdict"], "verdicts");
    print_counts(r["exonerated_by_gate"], "exonerated by gate");
    print_counts(r["actionable_by_class"], "actionable by class");
    if (r["actionable"] > 0) std::cout << p.red(r["actionable"].dump() + " change(s) survived every gate") << "\n";
    for (const auto& ex : r["examples"]) {
      std::cout << "\n" << p.bold(ex["table"].get<std::string>()) << "  " << ex["pair_kind"].get<std::string>() << "  "
                << ex["change_class"].get<std::string>() << "  " << p.dim(short_id(ex["before_id"]) + " \u2192 " + short_id(ex["after_id"]))
                << "\n";
      for (const auto& pv : pairs)
        if (pv.evaluated && pv.after->id == ex["after_id"] && pv.before->id == ex["before_id"]) print_diff(std::cout, pv.verdict.diff, p);
    }
  } catch (const CLI::Error&) {
    throw;  // finish(): an exit code, not a failure
  } catch (const std::runtime_error& e) {
    fail("report", e.what());
  }
  finish(0);
}

}  // namespace

void register_evidence_commands(CLI::App& app) {
  auto f = std::make_shared<Flags>();

  auto* baseline = app.add_subcommand("baseline", "snapshot live tables whose latest snapshot's columns differ (read-only)");
  add_common(baseline, f->c, false);
  baseline->add_option("--target", f->target, "libpq conninfo of the database to read (read-only)")->required();
  baseline->add_option("--schema", f->schemas, "only these schemas (default: the policy's)");
  baseline->add_option("--limit", f->limit, "capture at most N tables this run");
  baseline->add_option("--batch-size", f->batch, "tables per catalog read and store write");
  baseline->callback([f] { cmd_baseline(*f); });

  auto* diff = app.add_subcommand("diff", "diff two snapshots and classify the change");
  add_common(diff, f->c, true);
  diff->add_option("refs", f->refs, "ID_A ID_B, or SCHEMA.TABLE for its latest two")->expected(0, 2);
  diff->add_option("--resource", f->resource, "the latest two snapshots of this resource identity");
  diff->callback([f] { cmd_diff(*f); });

  auto* history = app.add_subcommand("history", "every snapshot of a table, in time order");
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
}

}  // namespace predrop::cli
