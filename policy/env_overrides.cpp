// PREDROP_<SECTION>_<KEY> overrides, applied after the file and validated by the same key table.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <map>

#include "policy/load_context.hpp"
#include "policy/suggest.hpp"
#include "policy/value_text.hpp"

extern char** environ;

namespace predrop::policy::detail {

namespace {

constexpr std::string_view kPrefix = "PREDROP_";
constexpr std::string_view kKillSwitch = "PREDROP_SNAPSHOTS";

std::string env_name(const std::string& dotted) {
  std::string out(kPrefix);
  for (char c : dotted) out += c == '.' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::map<std::string, std::string> predrop_variables() {
  std::map<std::string, std::string> vars;
  for (char** e = environ; e && *e; ++e) {
    std::string_view entry(*e);
    if (!entry.starts_with(kPrefix)) continue;
    auto eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    vars.emplace(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
  return vars;
}

// PREDROP_<SECTION>_... names the loader owns; other PREDROP_ variables (PREDROP_BIN for the
// tests, say) belong to someone else and are left alone.
bool claims(const std::string& var) {
  for (const auto& k : config_keys()) {
    auto dot = k.name.find('.');
    if (dot == std::string::npos) continue;
    if (var.starts_with(env_name(k.name.substr(0, dot)) + "_")) return true;
  }
  return false;
}

std::vector<std::string> split_list(std::string_view text) {
  std::vector<std::string> items;
  while (!text.empty()) {
    auto comma = text.find(',');
    std::string item = trim(text.substr(0, comma));
    if (!item.empty()) items.push_back(item);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return items;
}

void apply_one(LoadContext& ctx, const ConfigKey& spec, const std::string& var, const std::string& value) {
  const Origin at{kEnvironmentOrigin, 0, 0};
  ctx.origins[spec.name] = at;
  if (spec.shape == Shape::scalar) {
    apply_scalar(ctx, spec, ctx.config, value, at, var);
    return;
  }
  auto items = split_list(value);   // comma-separated: "a, b, c"
  for (const auto& item : items) {
    if (std::string err = spec.check_item(item); !err.empty()) {
      ctx.error(at, var + ": '" + item + "': " + err);
      return;
    }
  }
  spec.set_list(ctx.config, items);
}

}  // namespace

void apply_environment(LoadContext& ctx) {
  const auto vars = predrop_variables();
  std::vector<std::string> known;
  for (const auto& k : config_keys()) {
    const std::string var = env_name(k.name);
    known.push_back(var);
    if (auto it = vars.find(var); it != vars.end()) apply_one(ctx, k, var, it->second);
  }
  for (const auto& [var, value] : vars) {
    if (var == kKillSwitch || std::find(known.begin(), known.end(), var) != known.end() || !claims(var)) continue;
    ctx.error({kEnvironmentOrigin, 0, 0}, var + ": unknown override" + did_you_mean(var, known));
  }
  // The kill switch comes last so that it wins over PREDROP_SNAPSHOTS_ENABLED and the file.
  if (auto it = vars.find(std::string(kKillSwitch)); it != vars.end()) {
    auto on = parse_boolean(it->second);
    if (!on)
      ctx.error({kEnvironmentOrigin, 0, 0},
                std::string(kKillSwitch) + ": expected on or off, got '" + it->second + "'");
    else {
      ctx.config.snapshots_enabled = *on;
      ctx.origins["snapshots.enabled"] = {kEnvironmentOrigin, 0, 0};
    }
  }
}

}  // namespace predrop::policy::detail
