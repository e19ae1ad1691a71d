// Hides passwords in libpq conninfo strings, in both spellings libpq accepts:
//   key=value:  "host=db password='s3 cret' user=x"
//   URI:        "postgresql://user:s3cret@db/app?sslpassword=x"
// The rest of the string is kept as written so a masked conninfo still says where it points.
#include <algorithm>
#include <cctype>

#include "policy/policy.hpp"

namespace predrop::policy {

namespace {

constexpr std::string_view kMask = "****";

bool secret_param(std::string_view key) {
  std::string k(key);
  std::transform(k.begin(), k.end(), k.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return k == "password" || k == "sslpassword";
}

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

std::string mask_uri(std::string_view uri, std::size_t scheme_end) {
  std::string out(uri.substr(0, scheme_end));
  std::string_view rest = uri.substr(scheme_end);
  const std::size_t authority_end = std::min(rest.find_first_of("/?"), rest.size());
  std::string_view authority = rest.substr(0, authority_end);
  // The password is between the first ':' of the userinfo and the last '@' (a raw '@' in a
  // password is a user error libpq also rejects, but the last '@' is the safer guess).
  const auto at = authority.rfind('@');
  if (at != std::string_view::npos) {
    std::string_view userinfo = authority.substr(0, at);
    const auto colon = userinfo.find(':');
    if (colon != std::string_view::npos) {
      out += userinfo.substr(0, colon + 1);
      out += kMask;
    } else {
      out += userinfo;
    }
    out += authority.substr(at);
  } else {
    out += authority;
  }
  rest.remove_prefix(authority_end);
  const auto q = rest.find('?');
  out += rest.substr(0, q);
  if (q == std::string_view::npos) return out;
  std::string_view query = rest.substr(q + 1);
  out += '?';
  while (true) {
    const auto amp = query.find('&');
    std::string_view param = query.substr(0, amp);
    const auto eq = param.find('=');
    if (eq != std::string_view::npos && secret_param(param.substr(0, eq))) {
      out += param.substr(0, eq + 1);
      out += kMask;
    } else {
      out += param;
    }
    if (amp == std::string_view::npos) break;
    out += '&';
    query.remove_prefix(amp + 1);
  }
  return out;
}

std::string mask_key_value(std::string_view s) {
  std::string out;
  std::size_t i = 0;
  while (i < s.size()) {
    // Whitespace between pairs, copied.
    while (i < s.size() && is_space(s[i])) out += s[i++];
    const std::size_t key_begin = i;
    while (i < s.size() && s[i] != '=' && !is_space(s[i])) ++i;
    std::string_view key = s.substr(key_begin, i - key_begin);
    out += key;
    while (i < s.size() && is_space(s[i])) out += s[i++];
    if (i >= s.size() || s[i] != '=') continue;   // malformed; libpq will say so, we only mask
    out += s[i++];
    while (i < s.size() && is_space(s[i])) out += s[i++];
    // The value: 'quoted with \' escapes' or a run of non-space with \ escapes.
    const std::size_t value_begin = i;
    if (i < s.size() && s[i] == '\'') {
      ++i;
      while (i < s.size() && s[i] != '\'') i += (s[i] == '\\' && i + 1 < s.size()) ? 2 : 1;
      if (i < s.size()) ++i;
    } else {
      while (i < s.size() && !is_space(s[i])) i += (s[i] == '\\' && i + 1 < s.size()) ? 2 : 1;
    }
    i = std::min(i, s.size());
    if (secret_param(key))
      out += kMask;
    else
      out += s.substr(value_begin, i - value_begin);
  }
  return out;
}

}  // namespace

std::string mask_conninfo(std::string_view conninfo) {
  for (std::string_view scheme : {"postgresql://", "postgres://"})
    if (conninfo.size() >= scheme.size() &&
        std::equal(scheme.begin(), scheme.end(), conninfo.begin(),
                   [](char a, char b) { return a == std::tolower(static_cast<unsigned char>(b)); }))
      return mask_uri(conninfo, scheme.size());
  return mask_key_value(conninfo);
}

}  // namespace predrop::policy
