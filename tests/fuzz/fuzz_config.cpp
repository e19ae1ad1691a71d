// The YAML config loader: any text gets a config or errors, never a crash.
#include <cstdint>
#include <string_view>

#include "policy/policy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = predrop::policy::load_string(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.yaml");
  if (!r.config && r.errors.empty()) __builtin_trap();
  if (r.config) (void)predrop::policy::describe(*r.config);
  return 0;
}
