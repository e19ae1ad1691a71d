// The state of one load: the config being built, every error so far, and where each key's value
// came from, so that checks spanning keys can point at the line that set them.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "policy/keys.hpp"
#include "policy/policy.hpp"

namespace predrop::policy::detail {

inline constexpr const char* kEnvironmentOrigin = "environment";

struct Origin {
  std::string file;   // the config file's name, or kEnvironmentOrigin
  int line = 0;       // 1-based; 0 when not tied to a line
  int column = 0;
  bool from_environment() const { return file == kEnvironmentOrigin; }
};

struct LoadContext {
  std::string file;                        // for error messages
  std::string base_dir;                    // relative paths in the file resolve against it
  Config config;
  std::vector<ConfigError> errors;
  std::map<std::string, Origin> origins;   // dotted key -> where its value was last set

  void error(const Origin& at, std::string message) {
    errors.push_back(ConfigError{at.file, at.line, at.column, std::move(message)});
  }
  // Where a key was set, or the file itself when it kept its default.
  Origin origin_of(const std::string& key) const {
    auto it = origins.find(key);
    return it != origins.end() ? it->second : Origin{file, 0, 0};
  }
};

// Apply one scalar's text to a key; `label` names it in messages ("limits.max_clients",
// "rules[2].table", "PREDROP_LIMITS_MAX_CLIENTS"). Returns false after recording an error.
template <class Target>
bool apply_scalar(LoadContext& ctx, const KeySpec<Target>& spec, Target& target, std::string_view text,
                  const Origin& at, const std::string& label) {
  if (text.empty() && !spec.nullable) {
    ctx.error(at, label + ": expected " + spec.type + ", got nothing");
    return false;
  }
  std::string err = spec.set(target, text);
  if (!err.empty()) {
    ctx.error(at, label + ": " + err);
    return false;
  }
  return true;
}

// The walkers for each source, in the order load() runs them.
void apply_yaml_text(LoadContext& ctx, std::string_view yaml);
void apply_environment(LoadContext& ctx);
void resolve_secrets(LoadContext& ctx);   // conninfo vs conninfo_file, reading the files
void check_across_keys(LoadContext& ctx);

}  // namespace predrop::policy::detail
