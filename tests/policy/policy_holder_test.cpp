// Reload swaps the whole config, keeps the running one when the new file is invalid, and keeps
// restart-only keys at their running values.
#include <thread>

#include "test_support.hpp"

namespace predrop::policy {
namespace {

std::shared_ptr<const Config> load_path(const std::string& path) {
  auto r = load_file(path);
  EXPECT_TRUE(r.errors.empty()) << test::errors_text(r.errors);
  return r.config;
}

TEST(PolicyHolder, ReloadAppliesAValidFile) {
  test::TempDir dir;
  const std::string path = dir.write("p.yaml", "snapshots: {hold_timeout_ms: 100}\n");
  PolicyHolder holder(load_path(path));
  EXPECT_EQ(holder.current()->hold_timeout_ms, 100);
  auto before = holder.current();

  dir.write("p.yaml", "snapshots: {hold_timeout_ms: 200}\nrules:\n  - {table: \"t*\", action: skip}\n");
  auto r = holder.reload(path);
  EXPECT_TRUE(r.ok);
  EXPECT_TRUE(r.errors.empty());
  EXPECT_TRUE(r.restart_required.empty());
  EXPECT_EQ(holder.current()->hold_timeout_ms, 200);
  EXPECT_EQ(holder.current()->rules.size(), 1u);
  EXPECT_EQ(before->hold_timeout_ms, 100);   // a reader's snapshot is never changed under it
  EXPECT_EQ(holder.reloads_ok(), 1u);
  EXPECT_EQ(holder.reloads_failed(), 0u);
}

TEST(PolicyHolder, InvalidFileKeepsTheRunningPolicy) {
  test::TempDir dir;
  const std::string path = dir.write("p.yaml", "default: {action: skip}\n");
  PolicyHolder holder(load_path(path));
  auto before = holder.current();

  dir.write("p.yaml", "default: {action: skipp}\nlimits: {max_clients: 0}\n");
  auto r = holder.reload(path);
  EXPECT_FALSE(r.ok);
  ASSERT_EQ(r.errors.size(), 2u) << test::errors_text(r.errors);
  EXPECT_EQ(r.errors[0].file, path);
  EXPECT_EQ(r.errors[0].line, 1);
  EXPECT_EQ(holder.current(), before);
  EXPECT_EQ(holder.current()->default_rule.action, Action::skip);
  EXPECT_EQ(holder.reloads_failed(), 1u);

  std::filesystem::remove(path);   // a vanished file is also just a failed reload
  EXPECT_FALSE(holder.reload(path).ok);
  EXPECT_EQ(holder.current(), before);
  EXPECT_EQ(holder.reloads_failed(), 2u);
  EXPECT_EQ(holder.reloads_ok(), 0u);
}

TEST(PolicyHolder, RestartOnlyKeysKeepRunningValuesAndAreReported) {
  test::TempDir dir;
  const std::string path = dir.write("p.yaml", "listen: \"127.0.0.1:7000\"\nlimits: {max_clients: 5}\n");
  PolicyHolder holder(load_path(path));

  dir.write("p.yaml", "listen: \"127.0.0.1:7001\"\nlimits: {max_clients: 5}\nlogging: {level: debug}\n");
  auto r = holder.reload(path);
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.restart_required, (std::vector<std::string>{"listen"}));
  EXPECT_EQ(holder.current()->listen.port, 7000);
  EXPECT_EQ(holder.current()->logging.level, "debug");
  EXPECT_EQ(reload_behaviour("listen"), ReloadBehaviour::restart);
  EXPECT_EQ(reload_behaviour("logging.level"), ReloadBehaviour::sighup);
  EXPECT_EQ(reload_behaviour("rules[].table"), ReloadBehaviour::sighup);
  EXPECT_FALSE(reload_behaviour("nope"));
}

TEST(PolicyHolder, OverridesApplyToEveryReload) {
  test::TempDir dir;
  const std::string path = dir.write("p.yaml", "snapshots: {hold_timeout_ms: 100}\n");
  auto flags = [](Config& c) { c.hold_timeout_ms = 42; };   // e.g. --hold-timeout-ms 42
  auto initial = std::make_shared<Config>(*load_path(path));
  flags(*initial);
  PolicyHolder holder(initial, flags);
  dir.write("p.yaml", "snapshots: {hold_timeout_ms: 300, dedup_window_s: 5}\n");
  ASSERT_TRUE(holder.reload(path).ok);
  EXPECT_EQ(holder.current()->hold_timeout_ms, 42);
  EXPECT_EQ(holder.current()->dedup_window_s, 5);
}

TEST(PolicyHolder, ReadersRunConcurrentlyWithReloads) {
  test::TempDir dir;
  const std::string a = dir.write("a.yaml", "snapshots: {hold_timeout_ms: 1}\n");
  const std::string b = dir.write("b.yaml", "snapshots: {hold_timeout_ms: 2}\n");
  PolicyHolder holder(load_path(a));
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::thread reader([&] {
    while (!stop) {
      int v = holder.current()->hold_timeout_ms;
      if (v != 1 && v != 2) ++bad;
    }
  });
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(holder.reload(i % 2 ? a : b).ok);
  stop = true;
  reader.join();
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(holder.reloads_ok(), 50u);
}

}  // namespace
}  // namespace predrop::policy
