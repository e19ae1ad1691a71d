// Runs the predrop binary (PREDROP_BIN) as the evidence integration tests do: stdout captured,
// stderr dropped, the exit code kept.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

namespace predrop::evidence_test {

struct Run {
  int rc = -1;
  std::string out;
};

inline Run run_predrop(const std::string& args) {
  const char* bin = std::getenv("PREDROP_BIN");
  std::string cmd = std::string(bin ? bin : "predrop") + " " + args + " 2>/dev/null";
  Run r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int st = pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

inline std::string q(const std::string& s) { return "'" + s + "'"; }

inline nlohmann::json json_of(const Run& r) {
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out;
  return j;
}

}  // namespace predrop::evidence_test
