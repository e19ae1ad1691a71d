// Plumbing the evidence commands share: their flags, the store and diff options they resolve
// to, terminal colour, and small formatting helpers. A command ends by throwing
// CLI::RuntimeError(exit code) through finish() or fail().
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "evidence/drift.hpp"
#include "evidence/diff.hpp"
#include "policy/policy.hpp"

namespace predrop::cli {

struct Common {
  std::string store, config, format = "text", method = "reference";
  double threshold = 0.6, max_null_frac = 0.95;
  int min_values = 4;
};

struct Flags {
  Common c;
  std::vector<std::string> refs, schemas;
  std::string resource, target, output, name, database, schema;
  int limit = 0, days = 30;
  int batch = policy::Config{}.baseline_batch_size, lanes = policy::Config{}.baseline_lanes;
  bool latest = false;  // diff SCHEMA.TABLE: the latest two snapshots, not the latest pair
  bool dry_run = false;  // store prune
  std::string retention; // store prune: overrides store.retention
};

[[noreturn]] void finish(int code);
// Prints "predrop CMD: MSG" and throws CLI::RuntimeError(MSG, code): what() is the message.
[[noreturn]] void fail(const std::string& cmd, const std::string& msg, int code = 1);

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

// --store, --config, --format; with_diff_options adds the rename method and the gate bounds.
void add_common(CLI::App* sub, Common& c, bool with_diff_options);

struct Setup {
  std::shared_ptr<const policy::Config> cfg;
  std::string store;
  evidence::DiffOptions diff;
  Paint paint;
};

// Loads the config (exit 2 on errors) and resolves the store and the diff options.
Setup setup(const std::string& cmd, const Common& c);

std::string fmt(double v, int decimals);
std::string short_id(const std::string& id);
// 42s, 5m, 3h12m, 2d4h.
std::string human_age(int64_t seconds);
std::string join(const std::vector<std::string>& v, const std::string& sep = ", ");
evidence::DriftContext context_of(const evidence::StoredSnapshot& a, const evidence::StoredSnapshot& b);
nlohmann::json snapshot_json(const evidence::StoredSnapshot& s);

}  // namespace predrop::cli
