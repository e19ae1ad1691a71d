// Parsing and checking of scalar text, shared by the YAML walker and the environment overrides
// so that "PREDROP_LIMITS_MAX_CLIENTS=abc" fails exactly like "max_clients: abc".
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace predrop::policy::detail {

std::optional<long long> parse_integer(std::string_view text);
// true/false, yes/no, on/off, 1/0, any case: the spellings YAML 1.1 and shell users reach for.
std::optional<bool> parse_boolean(std::string_view text);
// "" when text is one of words, else "must be one of a, b, c; got 'x' (did you mean 'y'?)".
std::string check_word(std::string_view text, const std::vector<std::string>& words);
std::string endpoint_error(std::string_view text);
std::string join(const std::vector<std::string>& items, std::string_view sep);
std::string trim(std::string_view text);
// "schema.table" or "table", lower-case unquoted identifiers: the store table name is put into SQL.
std::string check_qualified_identifier(std::string_view text);
// One lower-case unquoted identifier (a schema name that is put into SQL).
std::string check_identifier(std::string_view text);
// Seconds: an integer, or a number with one unit s, m, h or d ("90m", "7d").
std::optional<long long> parse_duration_s(std::string_view text);
// The largest unit that divides it exactly: 604800 -> "7d", 90 -> "90s".
std::string format_duration_s(long long seconds);
// Bytes: an integer, or a number with one unit B, kB, MB, GB or TB, 1024-based as PostgreSQL's
// sizes are (any case: "10GB", "512mb").
std::optional<unsigned long long> parse_size_bytes(std::string_view text);

}  // namespace predrop::policy::detail
