#include "policy/value_text.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "policy/suggest.hpp"

namespace predrop::policy::detail {

std::optional<long long> parse_integer(std::string_view text) {
  long long v = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  if (text.empty()) return std::nullopt;
  auto [ptr, ec] = std::from_chars(begin, end, v);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return v;
}

std::optional<bool> parse_boolean(std::string_view text) {
  std::string t(text);
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (t == "true" || t == "yes" || t == "on" || t == "1") return true;
  if (t == "false" || t == "no" || t == "off" || t == "0") return false;
  return std::nullopt;
}

std::string join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += items[i];
  }
  return out;
}

std::string check_word(std::string_view text, const std::vector<std::string>& words) {
  if (std::find(words.begin(), words.end(), text) != words.end()) return {};
  return "must be one of " + join(words, ", ") + "; got '" + std::string(text) + "'" + did_you_mean(text, words);
}

std::string endpoint_error(std::string_view text) {
  return "expected HOST:PORT (IPv6 as [ADDR]:PORT, port 1..65535), got '" + std::string(text) + "'";
}

std::string trim(std::string_view text) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
  while (!text.empty() && space(text.front())) text.remove_prefix(1);
  while (!text.empty() && space(text.back())) text.remove_suffix(1);
  return std::string(text);
}

std::string check_qualified_identifier(std::string_view text) {
  auto part_ok = [](std::string_view p) {
    if (p.empty() || p.size() > 63) return false;
    if (!(std::islower(static_cast<unsigned char>(p[0])) || p[0] == '_')) return false;
    return std::all_of(p.begin(), p.end(), [](char c) {
      return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_';
    });
  };
  auto dot = text.find('.');
  bool ok = dot == std::string_view::npos ? part_ok(text)
                                          : part_ok(text.substr(0, dot)) && part_ok(text.substr(dot + 1));
  if (ok) return {};
  return "expected [schema.]table of lower-case letters, digits and _ (at most 63 each), got '" +
         std::string(text) + "'";
}

}  // namespace predrop::policy::detail
