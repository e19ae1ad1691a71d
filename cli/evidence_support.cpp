#include "cli/evidence_support.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>

namespace predrop::cli {

using namespace predrop::capture;
using namespace predrop::evidence;
using nlohmann::json;

void finish(int code) { throw CLI::RuntimeError(code); }

void fail(const std::string& cmd, const std::string& msg, int code) {
  std::cerr << "predrop " << cmd << ": " << msg << "\n";
  // The message rides along for a command run in-process (the console: cli/console_commands.cpp).
  throw CLI::RuntimeError(msg, code);
}

void add_common(CLI::App* sub, Common& c, bool with_diff_options) {
  sub->add_option("--store", c.store, "libpq conninfo of the snapshot store (default: the config's store.conninfo)");
  sub->add_option("--config", c.config, "YAML config file");
  sub->add_option("--format", c.format, "text or json (report: also html)")->check(CLI::IsMember({"text", "json", "html"}));
  if (!with_diff_options) return;
  sub->add_option("--rename-method,--method", c.method,
                  "rename matcher: reference (openarg §5, the default) or profile (alias profile+: tolerates value drift)")
      ->check(CLI::IsMember({"reference", "profile", "profile+"}));
  sub->add_option("--threshold", c.threshold, "rename similarity threshold (0.6)");
  sub->add_option("--min-values", c.min_values, "identifiability: meaningful values needed (4)");
  sub->add_option("--max-null-frac", c.max_null_frac, "identifiability: highest null fraction (0.95)");
}

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

std::string human_age(int64_t s) {
  if (s < 0) return "-" + human_age(-s);
  if (s >= 86400) return std::to_string(s / 86400) + "d" + std::to_string(s % 86400 / 3600) + "h";
  if (s >= 3600) return std::to_string(s / 3600) + "h" + std::to_string(s % 3600 / 60) + "m";
  if (s >= 60) return std::to_string(s / 60) + "m";
  return std::to_string(s) + "s";
}

std::string short_id(const std::string& id) { return id.substr(0, 8); }

std::string join(const std::vector<std::string>& v, const std::string& sep) {
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
          {"version", s.version ? json(*s.version) : json(nullptr)},
          {"database_name", s.database_name.empty() ? json(nullptr) : json(s.database_name)},
          {"table_oid", s.table_oid ? json(*s.table_oid) : json(nullptr)},
          {"stats_available", s.stats_available},
          {"pair_of", s.pair_of ? json(*s.pair_of) : json(nullptr)}};
}

}  // namespace predrop::cli
