// Helpers shared by the policy tests: scoped environment variables and temporary files, so that
// tests run in one process (the binary run by hand) do not leak state into each other.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "policy/policy.hpp"

namespace predrop::policy::test {

class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::string& value) : name_(std::move(name)) {
    if (const char* old = ::getenv(name_.c_str())) old_ = old;
    ::setenv(name_.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_.c_str(), old_->c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// A fresh directory per test under the system temp dir, removed afterwards.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "predrop-policy-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data()) ? pattern : throw std::runtime_error("mkdtemp failed");
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string write(const std::string& name, const std::string& content) const {
    auto p = std::filesystem::path(path_) / name;
    std::ofstream(p) << content;
    return p.string();
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::string errors_text(const std::vector<ConfigError>& errors) {
  std::string out;
  for (const auto& e : errors) out += e.to_string() + "\n";
  return out;
}

// Loads text that must be valid; fails the test with every error otherwise.
inline std::shared_ptr<const Config> load_ok(std::string_view yaml) {
  auto r = load_string(yaml, "test.yaml");
  EXPECT_TRUE(r.errors.empty()) << errors_text(r.errors);
  return r.config ? r.config : std::make_shared<const Config>();
}

// Loads text that must be invalid and returns its errors.
inline std::vector<ConfigError> load_errors(std::string_view yaml) {
  auto r = load_string(yaml, "test.yaml");
  EXPECT_FALSE(r.errors.empty()) << "expected errors for:\n" << yaml;
  EXPECT_EQ(r.config, nullptr);
  return r.errors;
}

}  // namespace predrop::policy::test
