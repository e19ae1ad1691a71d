#include "policy/value_text.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <utility>

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

namespace {

// "7d" -> (7, "d"); the number is digits only, the unit whatever follows (a space between is allowed).
std::optional<std::pair<unsigned long long, std::string>> split_number_unit(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
  if (i == 0 || i > 18) return std::nullopt;
  unsigned long long n = 0;
  std::from_chars(text.data(), text.data() + i, n);
  std::string_view unit = text.substr(i);
  if (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  std::string u(unit);
  std::transform(u.begin(), u.end(), u.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return std::make_pair(n, u);
}

}  // namespace

std::string check_identifier(std::string_view text) {
  if (text.empty() || text.size() > 63) return "expected a schema name of 1 to 63 characters, got '" + std::string(text) + "'";
  const unsigned char first = static_cast<unsigned char>(text.front());
  if (!(std::islower(first) || first == '_'))
    return "'" + std::string(text) + "' must start with a lower-case letter or _ (an unquoted identifier)";
  for (unsigned char c : text)
    if (!(std::islower(c) || std::isdigit(c) || c == '_' || c == '$'))
      return "'" + std::string(text) + "' may hold only a-z, 0-9, _ and $ (an unquoted identifier)";
  return {};
}

std::optional<long long> parse_duration_s(std::string_view text) {
  auto parts = split_number_unit(text);
  if (!parts) return std::nullopt;
  const auto& [n, unit] = *parts;
  unsigned long long mult = 0;
  if (unit.empty() || unit == "s") mult = 1;
  else if (unit == "m") mult = 60;
  else if (unit == "h") mult = 3600;
  else if (unit == "d") mult = 86400;
  else return std::nullopt;
  if (n > static_cast<unsigned long long>(INT64_MAX) / mult) return std::nullopt;
  return static_cast<long long>(n * mult);
}

std::string format_duration_s(long long seconds) {
  if (seconds > 0 && seconds % 86400 == 0) return std::to_string(seconds / 86400) + "d";
  if (seconds > 0 && seconds % 3600 == 0) return std::to_string(seconds / 3600) + "h";
  if (seconds > 0 && seconds % 60 == 0) return std::to_string(seconds / 60) + "m";
  return std::to_string(seconds) + "s";
}

std::optional<unsigned long long> parse_size_bytes(std::string_view text) {
  auto parts = split_number_unit(text);
  if (!parts) return std::nullopt;
  const auto& [n, unit] = *parts;
  int shift = -1;
  if (unit.empty() || unit == "b") shift = 0;
  else if (unit == "kb") shift = 10;
  else if (unit == "mb") shift = 20;
  else if (unit == "gb") shift = 30;
  else if (unit == "tb") shift = 40;
  if (shift < 0 || n > (UINT64_MAX >> shift)) return std::nullopt;
  return n << shift;
}

}  // namespace predrop::policy::detail
