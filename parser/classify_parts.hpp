// What classify.cpp and fallback.cpp share: the parse-tree walk of text the parser accepts, and
// the fallback for text it rejects.
#pragma once

#include "parser/parser.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace predrop::parser::detail {

// Parses sql and appends one Statement per top-level statement; on a parse error appends
// nothing and returns the parser's message. shape_changes: classify_uncached()'s.
std::optional<std::string> parse_statements(const std::string& sql, std::vector<Statement>& out,
                                            bool shape_changes);

// The facts of a text the parser rejected (parse_error is the parser's message): split with the
// scanner, each statement classified alone (fallback.cpp).
// A statement read from its tokens reports no shape change.
Facts classify_fallback(const std::string& sql, std::string parse_error, bool shape_changes);

// pg_temp and pg_temp_N: the session's temporary schema.
bool is_temp_schema(std::string_view schema);

}  // namespace predrop::parser::detail
