// Runs every case of tests/parser/corpus/*.sqlcases (format: corpus/README.md).
// Each case becomes its own test, named <file>_<line>. Besides the case's own expectations,
// every case checks the invariants that hold for all input:
//   - soundness: a text with any fact but transaction control must pass may_matter();
//   - fingerprint is set exactly when something is destructive, unresolved, unparsed or (in
//     shape mode) changes a shape;
//   - the caching Classifier returns the same facts as classify_uncached().
// A case marked `shape_changes` is classified with shape_changes on, and its soundness check is
// the shape prefilter's: every shape change and every txn fact but begin/commit/rollback passes.
// Every other case is also classified in shape mode, which must add only shape facts.
// PREDROP_CORPUS_DUMP=1 prints the actual rendering of every case (for writing new cases).
#include "tests/parser/render.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

namespace predrop::parser::testing {
namespace {

struct CorpusCase {
  std::string id;    // test name: file stem and line
  std::string where; // file:line for messages
  std::string title;
  std::string sql;
  std::vector<std::string> expect;  // "N …" statement facts, in order
  bool nothing = false;
  bool parse_error = false;
  bool prefilter_false = false;
  bool shape_changes = false;
  std::optional<size_t> statements;
  std::optional<std::string> normalized;
  std::vector<std::string> absent;  // must not occur in normalized
};

// gtest prints parameters in failure messages; the location is what helps.
void PrintTo(const CorpusCase& c, std::ostream* os) { *os << c.where; }

std::string trim(std::string s) {
  auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

std::vector<CorpusCase> load_file(const std::filesystem::path& path) {
  std::vector<CorpusCase> cases;
  std::ifstream in(path);
  std::string line;
  size_t lineno = 0;
  CorpusCase* current = nullptr;
  std::vector<std::string> sql_lines;
  auto flush = [&] {
    if (!current) return;
    while (!sql_lines.empty() && trim(sql_lines.back()).empty()) sql_lines.pop_back();
    for (size_t i = 0; i < sql_lines.size(); ++i) current->sql += (i ? "\n" : "") + sql_lines[i];
    sql_lines.clear();
  };
  bool in_expect = false;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.rfind("=== ", 0) == 0) {
      flush();
      cases.emplace_back();
      current = &cases.back();
      current->id = path.stem().string() + "_" + std::to_string(lineno);
      for (char& c : current->id)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      current->where = path.filename().string() + ":" + std::to_string(lineno);
      current->title = line.substr(4);
      in_expect = false;
      continue;
    }
    if (!current) continue;  // file header comments
    if (line.rfind(">>>", 0) == 0) {
      if (!in_expect) flush();
      in_expect = true;
      const std::string e = trim(line.substr(3));
      if (e == "nothing") current->nothing = true;
      else if (e == "parse_error") current->parse_error = true;
      else if (e == "prefilter false") current->prefilter_false = true;
      else if (e == "shape_changes") current->shape_changes = true;
      else if (e.rfind("statements ", 0) == 0) current->statements = std::stoul(e.substr(11));
      else if (e.rfind("normalized ", 0) == 0) current->normalized = e.substr(11);
      else if (e.rfind("absent ", 0) == 0) current->absent.push_back(e.substr(7));
      else current->expect.push_back(e);
      continue;
    }
    if (in_expect) {
      if (!trim(line).empty()) ADD_FAILURE() << path << ":" << lineno << ": SQL after expectations";
      continue;
    }
    sql_lines.push_back(line);
  }
  flush();
  return cases;
}

std::vector<CorpusCase> load_corpus() {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(PREDROP_PARSER_CORPUS_DIR))
    if (entry.path().extension() == ".sqlcases") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  std::vector<CorpusCase> all;
  for (const auto& f : files) {
    auto cases = load_file(f);
    all.insert(all.end(), cases.begin(), cases.end());
  }
  return all;
}

const std::vector<CorpusCase>& corpus() {
  static const std::vector<CorpusCase> cases = load_corpus();
  return cases;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += "  " + l + "\n";
  return out.empty() ? "  (none)\n" : out;
}

class CorpusTest : public ::testing::TestWithParam<CorpusCase> {};

TEST_P(CorpusTest, Facts) {
  const CorpusCase& c = GetParam();
  SCOPED_TRACE(c.where + " " + c.title);
  ASSERT_TRUE(c.nothing || c.parse_error || c.prefilter_false || !c.expect.empty())
      << "a case needs at least one expectation (use 'nothing')";
  ASSERT_FALSE(c.nothing && !c.expect.empty()) << "'nothing' contradicts listed facts";

  const Facts facts = classify_uncached(c.sql, true, c.shape_changes);
  const std::vector<std::string> actual = render_facts(facts);

  EXPECT_EQ(facts.parse_error, c.parse_error) << facts.error_message;
  if (c.parse_error) {
    EXPECT_FALSE(facts.error_message.empty());
  }
  EXPECT_EQ(joined(actual), joined(c.expect)) << "SQL: " << c.sql;
  if (c.statements) {
    EXPECT_EQ(facts.statements.size(), *c.statements);
  }
  if (c.normalized) {
    EXPECT_EQ(facts.normalized, *c.normalized);
  }
  for (const auto& a : c.absent) {
    EXPECT_EQ(facts.normalized.find(a), std::string::npos) << "normalized leaks '" << a << "': " << facts.normalized;
  }
  if (!facts.parse_error && !facts.statements.empty()) {  // a text of comments alone normalises to nothing
    EXPECT_FALSE(facts.normalized.empty());
  }

  // Soundness of the prefilter: anything the classifier reports must get past it, except
  // transaction control alone, which the prefilter leaves out by design (prefilter.cpp); in shape
  // mode only BEGIN, COMMIT and ROLLBACK without TO stay out.
  const bool reportable = std::any_of(actual.begin(), actual.end(), [&](const std::string& l) {
    if (!c.shape_changes) return l.find(" txn ") == std::string::npos;
    return l.find(" txn begin") == std::string::npos && l.find(" txn commit") == std::string::npos &&
           l.find(" txn rollback") == std::string::npos;
  });
  if (reportable) {
    EXPECT_TRUE(may_matter(c.sql, c.shape_changes)) << "prefilter would hide: " << c.sql;
  }
  if (c.prefilter_false) {
    EXPECT_FALSE(may_matter(c.sql, c.shape_changes));
  }

  EXPECT_EQ(!facts.fingerprint.empty(),
            facts.destroys() || facts.unresolved() || facts.unparsed() || facts.changes_shape() || facts.yields());
  if (!c.shape_changes) {
    EXPECT_FALSE(facts.changes_shape());
    // Shape mode adds shape facts (changes, an ADD COLUMN action, 2PC gids) and takes none away.
    const Facts shape = classify_uncached(c.sql, true, true);
    ASSERT_EQ(shape.statements.size(), facts.statements.size());
    for (size_t i = 0; i < facts.statements.size(); ++i) {
      EXPECT_GE(shape.statements[i].targets.size(), facts.statements[i].targets.size()) << i;
      EXPECT_EQ(shape.statements[i].unresolved_risk, facts.statements[i].unresolved_risk) << i;
      EXPECT_EQ(shape.statements[i].unparsed, facts.statements[i].unparsed) << i;
      EXPECT_EQ(shape.statements[i].search_path.has_value(), facts.statements[i].search_path.has_value()) << i;
      EXPECT_EQ(shape.statements[i].role.has_value(), facts.statements[i].role.has_value()) << i;
    }
    EXPECT_EQ(shape.normalized, facts.normalized);
  }

  Classifier classifier(8);
  for (int round = 0; round < 2; ++round) {
    auto cached = classifier.classify(c.sql, true, c.shape_changes);
    if (!may_matter(c.sql, c.shape_changes)) {
      EXPECT_EQ(cached, nullptr);
      continue;
    }
    ASSERT_NE(cached, nullptr);
    EXPECT_EQ(render_facts(*cached), actual);
    EXPECT_EQ(cached->fingerprint, facts.fingerprint);
  }
}

std::string case_name(const ::testing::TestParamInfo<CorpusCase>& info) { return info.param.id; }

INSTANTIATE_TEST_SUITE_P(Corpus, CorpusTest, ::testing::ValuesIn(corpus()), case_name);

TEST(CorpusSize, AtLeast200Statements) {
  EXPECT_GE(corpus().size(), 200u);
  if (std::getenv("PREDROP_CORPUS_DUMP")) {
    for (const auto& c : corpus()) {
      const Facts f = classify_uncached(c.sql, true, c.shape_changes);
      std::cout << "=== " << c.title << "  [" << c.where << "]\n" << c.sql << "\n";
      if (c.shape_changes) std::cout << ">>> shape_changes\n";
      if (f.parse_error) std::cout << ">>> parse_error\n";
      auto lines = render_facts(f);
      if (lines.empty() && !f.parse_error) std::cout << ">>> nothing\n";
      for (const auto& l : lines) std::cout << ">>> " << l << "\n";
      std::cout << "    (normalized: " << f.normalized << ")\n\n";
    }
  }
}

}  // namespace
}  // namespace predrop::parser::testing
