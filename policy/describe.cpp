// describe(): the effective config as YAML, in the file's own layout, with secrets masked;
// what check-config prints and what the proxy logs at start and on reload.
#include <yaml-cpp/yaml.h>

#include "policy/keys.hpp"

namespace predrop::policy {

namespace {

std::vector<std::string> split_dots(const std::string& dotted) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    auto dot = dotted.find('.', start);
    parts.push_back(dotted.substr(start, dot - start));
    if (dot == std::string::npos) return parts;
    start = dot + 1;
  }
}

template <class Target>
void emit_value(YAML::Emitter& out, const detail::KeySpec<Target>& spec, const Target& t) {
  if (spec.shape == detail::Shape::list) {
    out << YAML::Flow << YAML::BeginSeq;
    for (const auto& item : spec.get_list(t)) out << item;
    out << YAML::EndSeq;
  } else {
    out << (spec.secret ? mask_conninfo(spec.get(t)) : spec.get(t));
  }
}

}  // namespace

std::string describe(const Config& config) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  // The table is in document order, so sections open and close as the dotted prefixes change.
  std::vector<std::string> open;
  for (const auto& spec : detail::config_keys()) {
    auto parts = split_dots(spec.name);
    std::vector<std::string> sections(parts.begin(), parts.end() - 1);
    std::size_t common = 0;
    while (common < open.size() && common < sections.size() && open[common] == sections[common]) ++common;
    while (open.size() > common) {
      out << YAML::EndMap;
      open.pop_back();
    }
    while (open.size() < sections.size()) {
      out << YAML::Key << sections[open.size()] << YAML::Value << YAML::BeginMap;
      open.push_back(sections[open.size()]);
    }
    out << YAML::Key << parts.back() << YAML::Value;
    emit_value(out, spec, config);
  }
  while (!open.empty()) {
    out << YAML::EndMap;
    open.pop_back();
  }
  out << YAML::Key << "rules" << YAML::Value;
  if (config.rules.empty()) out << YAML::Flow;   // "rules: []" rather than a dangling "[]" line
  out << YAML::BeginSeq;
  for (const auto& rule : config.rules) {
    out << YAML::BeginMap;
    for (const auto& spec : detail::rule_keys()) {
      // A who-condition left out is empty, and empty is not a value the loader takes back.
      if (spec.shape == detail::Shape::scalar && spec.get(rule).empty()) continue;
      out << YAML::Key << spec.name << YAML::Value;
      emit_value(out, spec, rule);
    }
    out << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

std::vector<ConfigValue> config_values(const Config& config) {
  std::vector<ConfigValue> values;
  for (const auto& spec : detail::config_keys()) {
    ConfigValue v{spec.name, {}, spec.reload};
    if (spec.shape == detail::Shape::list) {
      for (const auto& item : spec.get_list(config)) v.value += (v.value.empty() ? "" : ", ") + item;
    } else {
      v.value = spec.secret ? mask_conninfo(spec.get(config)) : spec.get(config);
    }
    values.push_back(std::move(v));
  }
  for (size_t i = 0; i < config.rules.size(); ++i) {
    for (const auto& spec : detail::rule_keys()) {
      ConfigValue v{"rules[" + std::to_string(i) + "]." + spec.name, {}, spec.reload};
      if (spec.shape == detail::Shape::list) {
        for (const auto& item : spec.get_list(config.rules[i])) v.value += (v.value.empty() ? "" : ", ") + item;
      } else {
        v.value = spec.get(config.rules[i]);
        if (v.value.empty()) continue;   // a who-condition left out
      }
      values.push_back(std::move(v));
    }
  }
  return values;
}

}  // namespace predrop::policy
