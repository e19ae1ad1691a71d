#include "policy/glob.hpp"

#include <cstddef>

namespace predrop::policy::detail {

bool glob_match(std::string_view pattern, std::string_view text) {
  // Iterative matching with one backtrack point: linear-ish, and no recursion a crafted
  // pattern like "*a*a*a*a*b" could blow up.
  std::size_t p = 0, t = 0;
  std::size_t star = std::string_view::npos, star_text = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      star_text = t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++star_text;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::string glob_syntax_error(std::string_view pattern) {
  if (pattern.empty()) return "is empty; use \"*\" to match any name";
  for (char c : pattern) {
    // Users who know shell globs or regexes write these expecting classes or alternation; taking
    // them literally would make the rule silently match nothing.
    switch (c) {
      case '[': case ']': case '{': case '}': case '\\': case '|': case '^': case '$':
        return std::string("contains '") + c + "'; only * and ? are wildcards here";
      default:
        if (static_cast<unsigned char>(c) < 0x20) return "contains a control character";
    }
  }
  return {};
}

}  // namespace predrop::policy::detail
