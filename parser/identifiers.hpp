// Identifier rules of the server's scanner, shared by the classifier and search_path parsing.
#pragma once

#include <string>
#include <string_view>

namespace predrop::parser {

// NAMEDATALEN - 1: the server truncates longer identifiers.
inline constexpr size_t kMaxIdentifierBytes = 63;

// downcase_identifier() for a UTF-8 database: ASCII letters only, other bytes kept.
inline std::string fold_identifier(std::string_view raw) {
  std::string out(raw);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

// truncate_identifier(): cut to 63 bytes without splitting a UTF-8 character (pg_mbcliplen).
inline std::string truncate_identifier(std::string name) {
  if (name.size() <= kMaxIdentifierBytes) return name;
  size_t len = kMaxIdentifierBytes;
  // Back off continuation bytes (10xxxxxx) so the cut falls on a character boundary.
  while (len > 0 && (static_cast<unsigned char>(name[len]) & 0xC0) == 0x80) --len;
  name.resize(len);
  return name;
}

}  // namespace predrop::parser
