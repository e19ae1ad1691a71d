// "did you mean X?": a typo in a key or value must be named, never silently ignored.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace predrop::policy::detail {

// Optimal string alignment distance: insertions, deletions, substitutions, adjacent swaps.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The closest candidate, if close enough to be a plausible typo; "" otherwise.
std::string closest(std::string_view word, const std::vector<std::string>& candidates);

// " (did you mean 'x'?)" or "", ready to append to a message.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace predrop::policy::detail
