// Placeholder until the loader lands: defaults only.
#include "policy/policy.hpp"
#include <charconv>
namespace predrop::policy {
std::string Endpoint::to_string() const { return host + ":" + std::to_string(port); }
std::optional<Endpoint> parse_endpoint(std::string_view hp) {
  auto pos = hp.rfind(':');
  if (pos == std::string_view::npos) return std::nullopt;
  Endpoint e;
  e.host = std::string(hp.substr(0, pos));
  auto p = hp.substr(pos + 1);
  unsigned v = 0;
  auto [ptr, ec] = std::from_chars(p.data(), p.data() + p.size(), v);
  if (ec != std::errc() || ptr != p.data() + p.size() || v == 0 || v > 65535) return std::nullopt;
  e.port = static_cast<uint16_t>(v);
  return e;
}
Decision Config::decide(std::string_view, std::string_view, std::string_view, int) const {
  return {default_rule.action, default_rule.on_failure, -1};
}
LoadResult load_defaults() { return {std::make_shared<Config>(), {}}; }
LoadResult load_file(const std::string&) { return load_defaults(); }
std::string describe(const Config&) { return "config\n"; }
std::string ConfigError::to_string() const { return file + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " + message; }
}  // namespace predrop::policy
