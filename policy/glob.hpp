// The globs of rules: '*' is any run of characters, '?' exactly one; everything else is literal.
#pragma once

#include <string>
#include <string_view>

namespace predrop::policy::detail {

bool glob_match(std::string_view pattern, std::string_view text);

// Why the pattern is not a glob this loader accepts, or "" when it is.
std::string glob_syntax_error(std::string_view pattern);

}  // namespace predrop::policy::detail
