#include "policy/suggest.hpp"

#include <algorithm>
#include <cctype>

namespace predrop::policy::detail {

namespace {
char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }
}  // namespace

std::size_t edit_distance(std::string_view a, std::string_view b) {
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      // Case differences count as half a typo at most: "Max_Clients" is obviously max_clients.
      const std::size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) && lower(a[i - 2]) == lower(b[j - 1]))
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

std::string closest(std::string_view word, const std::vector<std::string>& candidates) {
  // Up to a third of the word may be wrong (at least 2 edits): close enough to be a slip of the
  // fingers, far enough apart that unrelated keys are not offered.
  const std::size_t limit = std::max<std::size_t>(2, word.size() / 3);
  std::string best;
  std::size_t best_distance = limit + 1;
  for (const auto& c : candidates) {
    std::size_t dist = edit_distance(word, c);
    // One a prefix of the other ("dedup_window" for "dedup_window_s", "warning" for "warn") is a
    // likely truncation or habit from another tool, even when many characters apart.
    const std::string_view shorter = c.size() < word.size() ? std::string_view(c) : word;
    const std::string_view longer = c.size() < word.size() ? word : std::string_view(c);
    if (dist > limit && shorter.size() >= 4 && longer.substr(0, shorter.size()) == shorter) dist = limit;
    if (dist < best_distance) {
      best_distance = dist;
      best = c;
    }
  }
  return best;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  std::string c = closest(word, candidates);
  return c.empty() ? std::string() : " (did you mean '" + c + "'?)";
}

}  // namespace predrop::policy::detail
