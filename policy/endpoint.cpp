// HOST:PORT, with IPv6 literals in brackets ("[::1]:6432") as in URLs.
#include <charconv>

#include "policy/policy.hpp"

namespace predrop::policy {

std::string Endpoint::to_string() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

namespace {
bool host_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
         c == '_';
}
bool v6_char(char c) {
  return (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || (c >= '0' && c <= '9') || c == ':' || c == '.' ||
         c == '%' || (c >= 'g' && c <= 'z');  // %zone names like eth0
}
}  // namespace

std::optional<Endpoint> parse_endpoint(std::string_view hp) {
  Endpoint e;
  std::string_view port;
  if (!hp.empty() && hp.front() == '[') {
    auto close = hp.find(']');
    if (close == std::string_view::npos || close + 1 >= hp.size() || hp[close + 1] != ':') return std::nullopt;
    auto inner = hp.substr(1, close - 1);
    if (inner.empty() || inner.find(':') == std::string_view::npos) return std::nullopt;
    for (char c : inner)
      if (!v6_char(c)) return std::nullopt;
    e.host = std::string(inner);
    port = hp.substr(close + 2);
  } else {
    auto colon = hp.find(':');
    // A second colon means an unbracketed IPv6 address: which part is the port would be a guess.
    if (colon == std::string_view::npos || hp.find(':', colon + 1) != std::string_view::npos) return std::nullopt;
    auto host = hp.substr(0, colon);
    if (host.empty()) return std::nullopt;
    for (char c : host)
      if (!host_char(c)) return std::nullopt;
    e.host = std::string(host);
    port = hp.substr(colon + 1);
  }
  unsigned v = 0;
  auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), v);
  if (port.empty() || ec != std::errc() || ptr != port.data() + port.size() || v == 0 || v > 65535)
    return std::nullopt;
  e.port = static_cast<uint16_t>(v);
  return e;
}

std::optional<Endpoint> parse_admin_endpoint(std::string_view text) {
  if (!text.empty() && text.find_first_not_of("0123456789") == std::string_view::npos)
    return parse_endpoint("127.0.0.1:" + std::string(text));
  return parse_endpoint(text);
}

}  // namespace predrop::policy
