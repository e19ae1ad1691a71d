#include "cli/console_commands.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <tuple>

#include "capture/snapshot.hpp"
#include "proxy/console_command.hpp"
#include "cli/diff_text.hpp"
#include "cli/evidence_support.hpp"
#include "quarantine/held.hpp"
#include "evidence/ages.hpp"
#include "evidence/drift.hpp"
#include "evidence/store_reader.hpp"

namespace predrop::cli {

using nlohmann::json;
using proxy::ConsoleReply;
using proxy::console_words;

namespace {

// A name as the CLI takes it: quotes removed (capture::split_qualified reads "a.b" the same way).
std::string unquoted(const std::string& word) {
  if (word.size() >= 2 && word.front() == '"' && word.back() == '"') return word.substr(1, word.size() - 2);
  return word;
}

std::string text_of(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return {};
  return v.dump();
}

// Rows of a JSON array of objects, in these columns.
ConsoleReply table_of(const json& items, std::vector<std::string> columns) {
  ConsoleReply r;
  r.columns = std::move(columns);
  for (const auto& item : items) {
    std::vector<std::optional<std::string>> row;
    for (const auto& c : r.columns) {
      auto it = item.find(c);
      if (it == item.end() || it->is_null()) row.push_back(std::nullopt);
      else row.push_back(text_of(*it));
    }
    r.rows.push_back(std::move(row));
  }
  return r;
}

ConsoleReply failed(const std::string& words, const std::exception& e) {
  return ConsoleReply::error("58000", words + ": " + e.what());
}

// A console command's warnings (a database not reached, a store row not updated) go to serve's log.
quarantine::Warn log_warning(const std::string& words) {
  return [words](const std::string& line) { spdlog::warn("console: {}: {}", words, line); };
}

ConsoleReply needs_store(const std::string& words) {
  return ConsoleReply::error("55000", words + " reads the snapshot store, and this predrop has no store.conninfo");
}

ConsoleReply show_quarantine(const std::string& args, const proxy::ConsoleCaller&, std::shared_ptr<const policy::Config> cfg) {
  auto words = console_words(args);
  if (words.size() > 1) return ConsoleReply::error("42601", "SHOW QUARANTINE takes at most a database name");
  try {
    json all = quarantine::list(quarantine::reach_of(*cfg), words.empty() ? std::string() : unquoted(words[0]), log_warning("SHOW QUARANTINE"));
    return table_of(all, {"database", "id", "schema", "table", "quarantine_table", "bytes", "dropped_at", "dropped_by",
                          "age_s", "expires_in_s", "partitions", "dependents", "detached"});
  } catch (const std::exception& e) {
    return failed("SHOW QUARANTINE", e);
  }
}

ConsoleReply show_ages(const std::string& args, const proxy::ConsoleCaller&, std::shared_ptr<const policy::Config> cfg) {
  auto words = console_words(args);
  if (words.size() > 2) return ConsoleReply::error("42601", "SHOW AGES takes at most a database and a schema");
  if (cfg->store_conninfo.empty()) return needs_store("SHOW AGES");
  try {
    evidence::EvidenceStore store(cfg->store_conninfo, cfg->store_table);
    evidence::AgesQuery q;
    if (!words.empty()) q.database = unquoted(words[0]);
    if (words.size() > 1) q.schema = unquoted(words[1]);
    ConsoleReply r;
    r.columns = {"database", "schema", "table", "since", "since_from", "at_least", "age_s", "age", "versions_in_window",
                 "shapes_in_window", "last_seen", "window_days"};
    for (const auto& a : evidence::table_ages(store.session(), cfg->store_table, q))
      r.rows.push_back({a.database, a.schema, a.table, a.since, a.since_from, std::string(a.at_least ? "t" : "f"),
                        std::to_string(a.age_s), (a.at_least ? "at least " : "") + human_age(a.age_s),
                        std::to_string(a.versions_in_window), std::to_string(a.shapes_in_window), a.last_seen,
                        std::to_string(q.window_days)});
    return r;
  } catch (const std::exception& e) {
    return failed("SHOW AGES", e);
  }
}

// The latest pairs (one per table, newest first; or every pair of one table) and what changed.
ConsoleReply show_snapshots(const std::string& args, const proxy::ConsoleCaller&, std::shared_ptr<const policy::Config> cfg) {
  constexpr size_t kMaxRows = 200;
  constexpr int kWindowDays = 30;
  auto words = console_words(args);
  if (words.size() > 1) return ConsoleReply::error("42601", "SHOW SNAPSHOTS takes at most one schema.table");
  if (cfg->store_conninfo.empty()) return needs_store("SHOW SNAPSHOTS");
  try {
    evidence::EvidenceStore store(cfg->store_conninfo, cfg->store_table);
    std::vector<evidence::StoredSnapshot> snaps;
    std::string only_schema, only_table;
    if (!words.empty()) {
      std::tie(only_schema, only_table) = capture::split_qualified(words[0]);
      snaps = store.table_with_pairs(only_schema, only_table);
    } else {
      snaps = store.window(kWindowDays);
    }
    auto pairing = evidence::find_pairs(snaps);
    ConsoleReply r;
    r.columns = {"database", "schema", "table", "before", "before_reason", "before_at", "after", "after_reason", "after_at",
                 "changed"};
    // Pairs, and the snapshots in none (a new table's first after, a DROP with no recreate yet),
    // newest first; without a table, each table's newest entry only.
    struct Entry {
      const evidence::StoredSnapshot* before;
      const evidence::StoredSnapshot* after;
      const std::string* at;
    };
    std::vector<Entry> entries;
    for (const auto& p : pairing.pairs) entries.push_back({p.before, p.after, &p.after->captured_at});
    for (const auto* u : pairing.unpaired) {
      if (evidence::is_after(*u)) entries.push_back({nullptr, u, &u->captured_at});
      else entries.push_back({u, nullptr, &u->captured_at});
    }
    std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return *a.at > *b.at; });
    std::set<std::tuple<std::string, std::string, std::string>> shown;
    auto field = [](const evidence::StoredSnapshot* s, std::string evidence::StoredSnapshot::*f) -> std::optional<std::string> {
      if (!s) return std::nullopt;
      return s->*f;
    };
    for (const auto& e : entries) {
      const auto& named = e.before ? *e.before : *e.after;
      if (words.empty() && !shown.insert({named.database_name, named.schema_name, named.table_name}).second) continue;
      std::optional<std::string> changed;
      if (e.before && e.after) {
        if (!e.before->profile_ok || !e.after->profile_ok) changed = "(a profile could not be read)";
        else if (e.before->schema_hash == e.after->schema_hash) changed = "no column change";
        else changed = change_summary(evidence::diff_snapshots(*e.before, *e.after, {}));
      }
      using S = evidence::StoredSnapshot;
      r.rows.push_back({named.database_name, named.schema_name, named.table_name, field(e.before, &S::id),
                        field(e.before, &S::reason), field(e.before, &S::captured_at), field(e.after, &S::id),
                        field(e.after, &S::reason), field(e.after, &S::captured_at), changed});
      if (r.rows.size() >= kMaxRows) break;
    }
    if (!words.empty() && r.rows.empty() && snaps.empty())
      return ConsoleReply::error("42P01", "the store has no snapshot of " + words[0]);
    return r;
  } catch (const std::exception& e) {
    return failed("SHOW SNAPSHOTS", e);
  }
}

// UNDROP schema.table [AS name] [IN database]: without IN, the one database whose quarantine holds
// that table.
ConsoleReply undrop(const std::string& args, const proxy::ConsoleCaller& caller, std::shared_ptr<const policy::Config> cfg) {
  auto words = console_words(args);
  const std::string usage = "UNDROP schema.table [AS name] [IN database]";
  if (words.empty()) return ConsoleReply::error("42601", "UNDROP needs a table", {}, usage);
  std::string table = words[0], as, database;
  for (size_t i = 1; i < words.size(); i += 2) {
    std::string key = words[i];
    for (auto& c : key) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (i + 1 >= words.size() || (key != "AS" && key != "IN"))
      return ConsoleReply::error("42601", "syntax error in UNDROP near \"" + words[i] + "\"", {}, usage);
    (key == "AS" ? as : database) = unquoted(words[i + 1]);
  }
  try {
    auto [schema, name] = capture::split_qualified(table);
    if (database.empty()) {
      std::vector<std::string> holding;
      for (const auto& e : quarantine::list(quarantine::reach_of(*cfg), "", log_warning("UNDROP")))
        if (text_of(e["schema"]) == schema && text_of(e["table"]) == name &&
            std::find(holding.begin(), holding.end(), text_of(e["database"])) == holding.end())
          holding.push_back(text_of(e["database"]));
      if (holding.empty())
        return ConsoleReply::error("42P01", "no quarantined version of " + schema + "." + name + " in any database");
      if (holding.size() > 1)
        return ConsoleReply::error("42P09", schema + "." + name + " is quarantined in " + join(holding, ", "), {},
                                   "Name the database: " + usage + ".");
      database = holding[0];
    }
    spdlog::info("console: user {} from {}: UNDROP {}.{} in database {}", caller.user, caller.client_addr, schema, name, database);
    json r = quarantine::undrop(quarantine::reach_of(*cfg), schema + "." + name, "", as, database, log_warning("UNDROP"));
    json row = {{"id", r["id"]}, {"database", r["database"]}, {"table", r["table"]}, {"from", r["from"]},
                {"dropped_at", r["dropped_at"]}};
    std::string not_restored;
    for (const auto& x : r.value("not_restored", json::array()))
      not_restored += (not_restored.empty() ? "" : "; ") + text_of(x["kind"]) + " " + text_of(x["name"]) + ": " + text_of(x["reason"]);
    row["not_restored"] = not_restored;
    auto reply = table_of(json::array({row}), {"id", "database", "table", "from", "dropped_at", "not_restored"});
    reply.tag = "UNDROP";
    return reply;
  } catch (const std::exception& e) {
    return failed("UNDROP", e);
  }
}

}  // namespace

proxy::ConsoleCommands console_commands() {
  return {{"SHOW QUARANTINE", show_quarantine},
          {"SHOW AGES", show_ages},
          {"SHOW SNAPSHOTS", show_snapshots},
          {"UNDROP", undrop}};
}

}  // namespace predrop::cli
