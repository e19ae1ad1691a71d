// Pure functions over snapshots: the reference-compatible hash, array text parsing, clipping
// and the columns_profile JSON. No I/O here, so everything is unit-testable.
#include "capture/snapshot.hpp"

#include <openssl/sha.h>

#include <algorithm>
#include <nlohmann/json.hpp>

namespace predrop::capture {

std::string schema_hash(std::vector<std::string> names, const std::vector<std::string>& excluded) {
  names.erase(std::remove_if(names.begin(), names.end(),
                             [&](const std::string& n) {
                               return std::find(excluded.begin(), excluded.end(), n) != excluded.end();
                             }),
              names.end());
  // std::string compares bytes as unsigned char; for UTF-8 that is code-point order, which is
  // what the reference's Python sorted() uses (never the locale's collation).
  std::sort(names.begin(), names.end());
  std::string joined;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) joined += '|';
    joined += names[i];
  }
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(joined.data()), joined.size(), digest);
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(2 * SHA_DIGEST_LENGTH);
  for (unsigned char b : digest) {
    out += hex[b >> 4];
    out += hex[b & 15];
  }
  return out;
}

namespace {

// The byte length of the first n characters of s (clip_chars).
size_t clipped_length(std::string_view s, int n) {
  if (n < 0) n = 0;
  // n characters are at least n bytes: a shorter text is whole without a walk.
  if (s.size() <= static_cast<size_t>(n)) return s.size();
  int count = 0;
  int run = 0;  // continuation bytes since the last lead byte
  for (size_t i = 0; i < s.size(); ++i) {
    // A code point starts at every byte that is not a UTF-8 continuation byte (10xxxxxx).
    // Text that is not UTF-8 (an SQL_ASCII database) may hold long runs of continuation bytes:
    // past the three a sequence can have, each counts as a character, so the bound always holds.
    bool continuation = (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80;
    if (continuation && ++run <= 3) continue;
    if (!continuation) run = 0;
    if (count == n) return i;
    ++count;
  }
  return s.size();
}

// clip_chars without a copy: every parsed array value goes through it.
std::string clipped(std::string value, int n) {
  value.resize(clipped_length(value, n));
  return value;
}

// Decodes the code point starting at s[i] (lenient: a stray byte is its own code point).
uint32_t decode_at(std::string_view s, size_t i, size_t& len) {
  unsigned char c = s[i];
  int extra = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : 0;
  if (extra && i + extra >= s.size()) extra = 0;  // truncated sequence
  uint32_t cp = extra == 0 ? c : c & (0x3F >> extra);
  for (int k = 1; k <= extra; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  len = 1 + extra;
  return cp;
}

// Python's str.isspace(), which is what the reference's strip() removes.
bool py_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

std::string_view py_strip(std::string_view s) {
  while (!s.empty()) {
    size_t len;
    if (!py_space(decode_at(s, 0, len))) break;
    s.remove_prefix(len);
  }
  while (!s.empty()) {
    // Walk back to the start of the last code point.
    size_t start = s.size() - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80 && s.size() - start < 4) --start;
    size_t len;
    if (!py_space(decode_at(s, start, len)) || start + len != s.size()) break;
    s.remove_suffix(len);
  }
  return s;
}

bool ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// The reference application's text-form array parser, step for step: split on every comma,
// strip, strip quotes, first N parts, drop empties, clip.
std::vector<std::string> parse_naive(std::string_view text, const ProfileBounds& b) {
  std::vector<std::string> out;
  std::string_view t = py_strip(text);
  if (t.size() >= 2 && t.front() == '{' && t.back() == '}') t = t.substr(1, t.size() - 2);
  if (t.empty()) return out;
  int parts = 0;
  size_t pos = 0;
  while (parts < b.max_values) {
    size_t comma = t.find(',', pos);
    std::string_view part = t.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    part = py_strip(part);
    while (!part.empty() && part.front() == '"') part.remove_prefix(1);
    while (!part.empty() && part.back() == '"') part.remove_suffix(1);
    ++parts;
    if (!part.empty()) out.push_back(clip_chars(part, b.max_value_chars));
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return out;
}

// PostgreSQL's array_in grammar: optional dimension decoration, nested braces (flattened),
// quoted elements with backslash escapes, unquoted elements trimmed and backslash-escaped,
// unquoted NULL meaning no value (skipped: a profile holds values only).
std::vector<std::string> parse_proper(std::string_view t, const ProfileBounds& b) {
  std::vector<std::string> out;
  size_t i = 0, n = t.size();
  while (i < n && ascii_space(t[i])) ++i;
  if (i < n && t[i] == '[') {  // "[1:3]={...}"
    size_t eq = t.find('=', i);
    if (eq == std::string_view::npos) return out;
    i = eq + 1;
    while (i < n && ascii_space(t[i])) ++i;
  }
  if (i >= n || t[i] != '{') return out;
  int depth = 0;
  while (i < n && static_cast<int>(out.size()) < b.max_values) {
    char c = t[i];
    if (c == '{') { ++depth; ++i; continue; }
    if (c == '}') { if (--depth <= 0) break; ++i; continue; }
    if (c == ',' || ascii_space(c)) { ++i; continue; }
    std::string value;
    if (c == '"') {
      ++i;
      while (i < n && t[i] != '"') {
        if (t[i] == '\\' && i + 1 < n) ++i;
        value += t[i++];
      }
      ++i;  // closing quote
      out.push_back(clipped(std::move(value), b.max_value_chars));
      continue;
    }
    bool escaped_any = false;
    size_t last_significant = 0;  // length of value up to its last non-space or escaped char
    while (i < n && t[i] != ',' && t[i] != '}' && t[i] != '{') {
      if (t[i] == '\\' && i + 1 < n) {
        ++i;
        value += t[i++];
        escaped_any = true;
        last_significant = value.size();
        continue;
      }
      value += t[i];
      if (!ascii_space(t[i])) last_significant = value.size();
      ++i;
    }
    value.resize(last_significant);
    if (!escaped_any && value.size() == 4 && (value[0] | 0x20) == 'n' && (value[1] | 0x20) == 'u' &&
        (value[2] | 0x20) == 'l' && (value[3] | 0x20) == 'l')
      continue;
    out.push_back(clipped(std::move(value), b.max_value_chars));
  }
  return out;
}

}  // namespace

std::string clip_chars(std::string_view s, int n) { return std::string(s.substr(0, clipped_length(s, n))); }

std::vector<std::string> parse_pg_array(std::string_view text, const ProfileBounds& bounds, bool naive) {
  if (bounds.max_values <= 0) return {};
  return naive ? parse_naive(text, bounds) : parse_proper(text, bounds);
}

namespace {

// Strict UTF-8, as nlohmann's serializer checks it (no overlong forms, surrogates or code points
// past U+10FFFF).
bool valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    auto in = [&](size_t k, unsigned char lo, unsigned char hi) { return i + k < n && p[i + k] >= lo && p[i + k] <= hi; };
    if (c >= 0xC2 && c <= 0xDF) {
      if (!in(1, 0x80, 0xBF)) return false;
      i += 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      const unsigned char lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
      if (!in(1, lo, hi) || !in(2, 0x80, 0xBF)) return false;
      i += 3;
    } else if (c >= 0xF0 && c <= 0xF4) {
      const unsigned char lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
      if (!in(1, lo, hi) || !in(2, 0x80, 0xBF) || !in(3, 0x80, 0xBF)) return false;
      i += 4;
    } else {
      return false;
    }
  }
  return true;
}

// s as a JSON string, byte for byte as nlohmann's dump() with ensure_ascii off writes it. Text
// that is not valid UTF-8 goes through nlohmann itself: its replacement of bad sequences is what
// is stored.
void append_json_string(std::string& out, std::string_view s) {
  if (!valid_utf8(s)) {
    out += nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return;
  }
  out += '"';
  size_t run = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(s.substr(run, i - run));
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default: {
        static const char* hex = "0123456789abcdef";
        out += "\\u00";
        out += hex[c >> 4];
        out += hex[c & 15];
      }
    }
    run = i + 1;
  }
  out.append(s.substr(run));
  out += '"';
}

void append_json_number(std::string& out, const std::optional<double>& v) {
  // nlohmann's shortest round-trip form (and null for what JSON cannot hold), as before.
  out += v ? nlohmann::json(*v).dump() : std::string("null");
}

void append_json_strings(std::string& out, const std::vector<std::string>& values) {
  out += '[';
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += ',';
    append_json_string(out, values[i]);
  }
  out += ']';
}

}  // namespace

std::string columns_profile_json(const std::vector<ColumnProfile>& columns) {
  // Written directly, not through a JSON document: a baseline batch writes a hundred tables'
  // profiles, and building a document of every value was a tenth of the baseline's client CPU.
  // The text is the one nlohmann's ordered_json dump() gave (the unit tests compare the two): the
  // reference's key order, compact, non-ASCII unescaped.
  std::string out;
  size_t size = 2;
  for (const auto& c : columns) {
    size += 160 + c.name.size() + c.pg_type.size();
    for (const auto& v : c.most_common_vals) size += v.size() + 3;
    for (const auto& v : c.histogram_sample) size += v.size() + 3;
  }
  out.reserve(size);
  out += '[';
  for (size_t i = 0; i < columns.size(); ++i) {
    const auto& c = columns[i];
    if (i) out += ',';
    out += "{\"name\":";
    append_json_string(out, c.name);
    out += ",\"ordinal\":";
    out += std::to_string(c.ordinal);
    out += ",\"pg_type\":";
    append_json_string(out, c.pg_type);
    out += ",\"null_frac\":";
    append_json_number(out, c.null_frac);
    out += ",\"n_distinct\":";
    append_json_number(out, c.n_distinct);
    out += ",\"most_common_vals\":";
    append_json_strings(out, c.most_common_vals);
    out += ",\"histogram_sample\":";
    append_json_strings(out, c.histogram_sample);
    out += '}';
  }
  out += ']';
  return out;
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) s.replace(pos, from.size(), to);
}

std::string pg_array_literal(const std::vector<std::optional<std::string>>& values) {
  // Sized first and copied in runs between the characters to escape: a baseline batch's
  // columns_profile array is hundreds of kilobytes of JSON, a quote in every few bytes.
  size_t size = 2 + values.size();
  for (const auto& v : values) size += v ? v->size() + 2 + std::count_if(v->begin(), v->end(), [](char c) { return c == '"' || c == '\\'; }) : 4;
  std::string out;
  out.reserve(size);
  out += '{';
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += ',';
    if (!values[i]) {
      out += "NULL";
      continue;
    }
    out += '"';
    std::string_view rest = *values[i];
    for (size_t special; (special = rest.find_first_of("\"\\")) != std::string_view::npos; rest.remove_prefix(special + 1)) {
      out.append(rest.substr(0, special));
      out += '\\';
      out += rest[special];
    }
    out.append(rest);
    out += '"';
  }
  out += '}';
  return out;
}

std::pair<std::string, std::string> split_qualified(std::string_view name, std::string_view default_schema) {
  auto unquote = [](std::string_view p) {
    while (!p.empty() && ascii_space(p.front())) p.remove_prefix(1);
    while (!p.empty() && ascii_space(p.back())) p.remove_suffix(1);
    if (p.size() >= 2 && p.front() == '"' && p.back() == '"') {
      std::string out;
      for (size_t i = 1; i + 1 < p.size(); ++i) {
        out += p[i];
        if (p[i] == '"' && i + 2 < p.size() && p[i + 1] == '"') ++i;  // "" inside quotes
      }
      return out;
    }
    return std::string(p);
  };
  // The first dot outside double quotes separates schema from table.
  bool quoted = false;
  for (size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '"') quoted = !quoted;
    if (name[i] == '.' && !quoted) {
      std::string schema = unquote(name.substr(0, i));
      return {schema.empty() ? std::string(default_schema) : schema, unquote(name.substr(i + 1))};
    }
  }
  return {std::string(default_schema), unquote(name)};
}

}  // namespace predrop::capture
