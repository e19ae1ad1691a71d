// pg_stats array text ({a,"b,c",NULL}) in both the exact and the reference's naive mode.
#include <cstdint>
#include <string_view>

#include "capture/snapshot.hpp"
#include "tests/capture/profile_json_reference.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace predrop::capture;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  ProfileBounds bounds;
  for (bool naive : {false, true}) {
    auto values = parse_pg_array(text, bounds, naive);
    if (values.size() > static_cast<size_t>(bounds.max_values)) __builtin_trap();
    for (const auto& v : values)
      if (v.size() > static_cast<size_t>(bounds.max_value_chars) * 4) __builtin_trap();
  }
  (void)clip_chars(text, 7);
  // The profile's direct JSON writer against the document it replaced, on the raw bytes and on
  // the values parsed from them.
  ColumnProfile column{std::string(text), 1, std::string(text.substr(0, size / 2)), 0.5, std::nullopt,
                       parse_pg_array(text, bounds, false), {std::string(text.substr(size / 2))}};
  if (columns_profile_json({column}) != test::columns_profile_json_reference({column})) __builtin_trap();
  return 0;
}
