// Walks the YAML document against the key table. Every problem is recorded with its position
// and the walk goes on, so one run of check-config shows every mistake in the file.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "policy/load_context.hpp"
#include "policy/suggest.hpp"

namespace predrop::policy::detail {

namespace {

Origin origin_at(const LoadContext& ctx, const YAML::Mark& mark) {
  if (mark.line < 0) return {ctx.file, 0, 0};
  return {ctx.file, mark.line + 1, mark.column + 1};   // yaml-cpp counts from 0, editors from 1
}

// A null value ("key:" with nothing after) has no useful mark of its own; point at its key.
Origin value_origin(const LoadContext& ctx, const YAML::Node& key, const YAML::Node& value) {
  return value.IsNull() ? origin_at(ctx, key.Mark()) : origin_at(ctx, value.Mark());
}

// Never echoes the value itself: a conninfo in the wrong place would print its password.
std::string shape_name(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Null: return "nothing";
    default: return "a single value";
  }
}

std::string resolve_path(const LoadContext& ctx, const std::string& text) {
  if (text.empty() || ctx.base_dir.empty() || std::filesystem::path(text).is_absolute()) return text;
  return (std::filesystem::path(ctx.base_dir) / text).lexically_normal().string();
}

// Refuses a key seen twice in one mapping: yaml-cpp keeps both, and which one a reader
// honours would be an accident.
class DuplicateGuard {
 public:
  bool first_time(LoadContext& ctx, const YAML::Node& key, const std::string& label) {
    auto [it, inserted] = seen_.emplace(key.Scalar(), key.Mark().line + 1);
    if (!inserted)
      ctx.error(origin_at(ctx, key.Mark()),
                "duplicate key '" + label + "' (first set on line " + std::to_string(it->second) + ")");
    return inserted;
  }

 private:
  std::map<std::string, int> seen_;
};

template <class Target>
void apply_node(LoadContext& ctx, const KeySpec<Target>& spec, Target& target, const YAML::Node& key,
                const YAML::Node& value, const std::string& label) {
  const Origin at = value_origin(ctx, key, value);
  if (spec.shape == Shape::scalar) {
    if (value.IsNull()) {
      apply_scalar(ctx, spec, target, "", at, label);
    } else if (!value.IsScalar()) {
      ctx.error(at, label + ": expected " + spec.type + ", got " + shape_name(value));
    } else {
      std::string text = spec.path ? resolve_path(ctx, value.Scalar()) : value.Scalar();
      apply_scalar(ctx, spec, target, text, at, label);
    }
    return;
  }
  std::vector<std::string> items;
  bool ok = true;
  if (value.IsSequence()) {
    for (std::size_t i = 0; i < value.size(); ++i) {
      const YAML::Node item = value[i];
      const Origin item_at = origin_at(ctx, item.Mark());
      const std::string item_label = label + "[" + std::to_string(i) + "]";
      if (!item.IsScalar()) {
        ctx.error(item.IsNull() ? at : item_at, item_label + ": expected a string, got " + shape_name(item));
        ok = false;
        continue;
      }
      if (std::string err = spec.check_item(item.Scalar()); !err.empty()) {
        ctx.error(item_at, item_label + ": " + err);
        ok = false;
        continue;
      }
      items.push_back(item.Scalar());
    }
  } else if (!value.IsNull()) {
    ctx.error(at, label + ": expected " + spec.type + " like [a, b], got " + shape_name(value));
    return;
  }
  if (ok && items.empty() && !spec.allow_empty_list) {
    ctx.error(at, label + ": must not be empty; leave the key out to mean all");
    return;
  }
  if (ok) spec.set_list(target, items);
}

// The names directly under `prefix` ("" for the top level, "snapshots." for a section).
std::vector<std::string> children_of(const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& k : config_keys()) {
    if (k.name.compare(0, prefix.size(), prefix) != 0) continue;
    std::string rest = k.name.substr(prefix.size());
    rest = rest.substr(0, rest.find('.'));
    if (std::find(out.begin(), out.end(), rest) == out.end()) out.push_back(rest);
  }
  if (prefix.empty()) out.push_back("rules");
  return out;
}

bool is_section(const std::string& dotted) {
  for (const auto& k : config_keys())
    if (k.name.size() > dotted.size() && k.name.compare(0, dotted.size() + 1, dotted + ".") == 0) return true;
  return false;
}

std::string unknown_key_message(const std::string& prefix, const std::string& key) {
  std::string where = prefix.empty() ? "" : " in " + prefix.substr(0, prefix.size() - 1);
  std::string msg = "unknown key '" + key + "'" + where;
  std::string near = closest(key, children_of(prefix));
  if (!near.empty()) return msg + " (did you mean '" + near + "'?)";
  // The right name in the wrong section ("max_clients" at the top level) is a common slip.
  for (const auto& k : config_keys()) {
    auto dot = k.name.rfind('.');
    std::string last = dot == std::string::npos ? k.name : k.name.substr(dot + 1);
    if (last == key) return msg + " (did you mean '" + k.name + "'?)";
  }
  return msg;
}

void walk_rules(LoadContext& ctx, const YAML::Node& key, const YAML::Node& list) {
  ctx.origins["rules"] = value_origin(ctx, key, list);
  if (list.IsNull()) return;
  if (!list.IsSequence()) {
    ctx.error(value_origin(ctx, key, list), "rules: expected a list of rules, got " + shape_name(list));
    return;
  }
  std::vector<std::string> names;
  for (const auto& k : rule_keys()) names.push_back(k.name);
  for (std::size_t i = 0; i < list.size(); ++i) {
    const YAML::Node entry = list[i];
    const std::string label = "rules[" + std::to_string(i) + "]";
    if (!entry.IsMap()) {
      ctx.error(entry.IsNull() ? origin_at(ctx, key.Mark()) : origin_at(ctx, entry.Mark()),
                label + ": expected a mapping like {table: \"*\", action: snapshot}, got " + shape_name(entry));
      continue;
    }
    Rule rule;
    DuplicateGuard guard;
    Origin kinds_at = origin_at(ctx, entry.Mark());
    for (const auto& field : entry) {
      const YAML::Node key = field.first;
      const YAML::Node value = field.second;
      const std::string name = key.Scalar();
      if (!guard.first_time(ctx, key, label + "." + name)) continue;
      const RuleKey* spec = find_rule_key(name);
      if (!spec) {
        ctx.error(origin_at(ctx, key.Mark()), "unknown key '" + name + "' in " + label + did_you_mean(name, names));
        continue;
      }
      if (name == "kinds") kinds_at = value_origin(ctx, key, value);
      apply_node(ctx, *spec, rule, key, value, label + "." + name);
    }
    // Such a rule would quietly snapshot: it names no kind a quarantine can keep.
    constexpr uint32_t kQuarantineKinds = 0b11;   // drop_table, drop_schema
    if (rule.action == Action::quarantine && rule.kinds_set && (rule.kinds & kQuarantineKinds) == 0)
      ctx.error(kinds_at, label + ": action quarantine covers only drop_table and drop_schema, but kinds names neither; "
                                  "use action: snapshot for these kinds, or add drop_table");
    ctx.config.rules.push_back(std::move(rule));
  }
}

void walk_section(LoadContext& ctx, const YAML::Node& map, const std::string& prefix) {
  DuplicateGuard guard;
  for (const auto& entry : map) {   // by value: yaml-cpp's iterator hands out temporaries
    const YAML::Node key = entry.first;
    const YAML::Node value = entry.second;
    if (!key.IsScalar()) {
      ctx.error(origin_at(ctx, key.Mark()), "keys must be plain names, got " + shape_name(key));
      continue;
    }
    const std::string dotted = prefix + key.Scalar();
    if (!guard.first_time(ctx, key, dotted)) continue;
    if (const ConfigKey* spec = find_config_key(dotted)) {
      ctx.origins[dotted] = value_origin(ctx, key, value);
      apply_node(ctx, *spec, ctx.config, key, value, dotted);
    } else if (dotted == "rules") {
      walk_rules(ctx, key, value);
    } else if (is_section(dotted)) {
      if (value.IsMap()) {
        walk_section(ctx, value, dotted + ".");
      } else if (!value.IsNull()) {   // an empty section ("tls:") is harmless
        ctx.error(value_origin(ctx, key, value), dotted + ": expected a mapping of keys, got " + shape_name(value));
      }
    } else {
      ctx.error(origin_at(ctx, key.Mark()), unknown_key_message(prefix, key.Scalar()));
    }
  }
}

}  // namespace

void apply_yaml_text(LoadContext& ctx, std::string_view yaml) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    ctx.error(origin_at(ctx, e.mark), "YAML syntax: " + e.msg);
    return;
  }
  if (root.IsNull()) return;   // an empty file: all defaults
  if (!root.IsMap()) {
    ctx.error(origin_at(ctx, root.Mark()), "expected a mapping of sections at the top, got " + shape_name(root));
    return;
  }
  walk_section(ctx, root, "");
}

}  // namespace predrop::policy::detail
