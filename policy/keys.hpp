// The table of every config key: how its text is parsed and validated, how it is shown, and
// whether it reloads. The YAML walker, the environment overrides, describe() and reload all read
// this one table, so a key cannot be accepted by one path and missed by another.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/policy.hpp"

namespace predrop::policy::detail {

enum class Shape : uint8_t { scalar, list };

template <class Target>
struct KeySpec {
  std::string name;                 // dotted: "limits.max_clients"; rule keys are relative ("table")
  std::string type;                 // for messages: "an integer 1..64", "HOST:PORT"
  Shape shape = Shape::scalar;
  ReloadBehaviour reload = ReloadBehaviour::restart;
  bool nullable = false;            // an empty value (YAML null, empty env var) means "unset"
  bool secret = false;              // shown through mask_conninfo()
  bool path = false;                // relative paths are resolved against the config file's folder
  bool allow_empty_list = true;     // "kinds: []" would make a rule match nothing: refused
  // Scalars: parse, validate and store; the return is the error ("" on success), phrased to
  // follow the key name: "must be between 1 and 64, got 0".
  std::function<std::string(Target&, std::string_view)> set;
  // Lists: each item is validated on its own (so errors point at the item), then stored whole.
  std::function<std::string(std::string_view)> check_item;
  std::function<void(Target&, const std::vector<std::string>&)> set_list;
  std::function<std::string(const Target&)> get;
  std::function<std::vector<std::string>(const Target&)> get_list;
  std::function<void(Target&, const Target&)> copy;
};

using ConfigKey = KeySpec<Config>;
using RuleKey = KeySpec<Rule>;

// In document order: top-level keys, then each section's keys.
const std::vector<ConfigKey>& config_keys();
// The keys of one entry of rules:, relative ("database", "kinds").
const std::vector<RuleKey>& rule_keys();
const ConfigKey* find_config_key(std::string_view dotted);
const RuleKey* find_rule_key(std::string_view name);

}  // namespace predrop::policy::detail
