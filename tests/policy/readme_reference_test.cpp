// README's configuration reference and the loader's key table must list the same keys, so the
// documentation cannot drift from what the loader accepts.
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "test_support.hpp"

namespace predrop::policy {
namespace {

std::string source_dir() {
  if (const char* env = std::getenv("PREDROP_SOURCE_DIR"); env && *env) return env;
  return PREDROP_SOURCE_DIR_DEFAULT;
}

std::string reference_region() {
  std::ifstream in(source_dir() + "/README.md");
  EXPECT_TRUE(in) << "cannot read " << source_dir() << "/README.md";
  std::stringstream text;
  text << in.rdbuf();
  const std::string all = text.str();
  const std::string begin = "<!-- config-reference:begin -->", end = "<!-- config-reference:end -->";
  const auto b = all.find(begin), e = all.find(end);
  EXPECT_NE(b, std::string::npos);
  EXPECT_NE(e, std::string::npos);
  if (b == std::string::npos || e == std::string::npos || e < b) return {};
  return all.substr(b + begin.size(), e - b - begin.size());
}

struct Row {
  std::string key;
  std::vector<std::string> cells;
};

// Table rows whose first cell is a `key` in backticks; header and separator rows are skipped.
std::vector<Row> key_rows(const std::string& region) {
  std::vector<Row> rows;
  std::istringstream lines(region);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("| `", 0) != 0) continue;
    Row row;
    std::string cell;
    std::istringstream cells(line.substr(1));
    while (std::getline(cells, cell, '|')) row.cells.push_back(cell);
    const std::string& first = row.cells.at(0);
    const auto open = first.find('`'), close = first.find('`', open + 1);
    row.key = first.substr(open + 1, close - open - 1);
    rows.push_back(row);
  }
  return rows;
}

TEST(ReadmeReference, DocumentsExactlyTheKnownKeys) {
  const auto rows = key_rows(reference_region());
  std::multiset<std::string> documented;
  for (const auto& r : rows) documented.insert(r.key);
  const auto keys = known_keys();
  const std::multiset<std::string> known(keys.begin(), keys.end());
  for (const auto& k : known)
    EXPECT_EQ(documented.count(k), 1u) << "README's reference must document '" << k << "' exactly once";
  for (const auto& d : documented)
    EXPECT_EQ(known.count(d), 1u) << "README documents '" << d << "', which the loader does not accept";
  EXPECT_FALSE(rows.empty());
}

TEST(ReadmeReference, ReloadColumnMatchesTheLoader) {
  // Columns: key | type | default | meaning | reload.
  for (const auto& row : key_rows(reference_region())) {
    ASSERT_GE(row.cells.size(), 5u) << row.key;
    const std::string& reload = row.cells[4];
    auto behaviour = reload_behaviour(row.key);
    if (!behaviour) continue;   // reported by the test above
    const bool says_sighup = reload.find("SIGHUP") != std::string::npos;
    const bool says_restart = reload.find("restart") != std::string::npos;
    EXPECT_NE(says_sighup, says_restart) << row.key << ": reload cell must say SIGHUP or restart";
    EXPECT_EQ(says_sighup, *behaviour == ReloadBehaviour::sighup) << row.key;
  }
}

TEST(ReadmeReference, ExamplesLoad) {
  const std::string region = reference_region();
  const std::string fence = "```yaml\n";
  int examples = 0;
  for (auto at = region.find(fence); at != std::string::npos; at = region.find(fence, at + 1)) {
    const auto body = at + fence.size();
    const auto end = region.find("```", body);
    ASSERT_NE(end, std::string::npos);
    auto r = load_string(region.substr(body, end - body), "README example");
    EXPECT_TRUE(r.errors.empty()) << test::errors_text(r.errors);
    ++examples;
  }
  EXPECT_GE(examples, 1);
}

TEST(ReadmeReference, KnownKeysHaveNoDuplicates) {
  const auto keys = known_keys();
  const std::set<std::string> unique(keys.begin(), keys.end());
  EXPECT_EQ(unique.size(), keys.size());
  EXPECT_TRUE(unique.count("limits.max_clients"));
  EXPECT_TRUE(unique.count("rules[].kinds"));
  EXPECT_TRUE(unique.count("snapshots.profile.max_values"));
}

}  // namespace
}  // namespace predrop::policy
