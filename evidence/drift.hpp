// Drift classification (the reference application's spec 024 exoneration cascade): a cascade of gates that can only exonerate a
// diff or abstain, never accuse; whatever survives every gate is "unexplained" and actionable.
// Pure: no database, clock or network.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "evidence/diff.hpp"

namespace predrop::evidence {

// nullopt: not evaluated (recorded, never exonerates).
struct DriftContext {
  std::optional<bool> same_identity;
  std::optional<bool> same_source_url;
};

struct DriftVerdict {
  std::string verdict;        // no_change | exonerated | unattributable | unexplained
  std::string change_class;   // unexplained only: rename | reshape | additive | removal | type_change | semantic
  std::string exonerated_by;  // G0_identity | G2_sibling | G1_provenance | G3_pipeline
  std::string reason;         // one human-checkable sentence
  SnapshotDiff diff;
  std::vector<std::string> gates_not_evaluated;
  bool is_actionable = false;  // verdict == unexplained
};

// false for null or empty, "unavailable", "legacy:unknown", and bare dates (three all-digit parts
// split on '-'): placeholders, not fingerprints.
bool is_real_provenance(const std::optional<std::string>& v);

DriftVerdict classify_change(const StoredSnapshot& before, const StoredSnapshot& after, const DriftContext& ctx = {},
                             const DiffOptions& opt = {});

struct VerdictSummary {
  int evaluated = 0;
  int actionable = 0;
  std::map<std::string, int> by_verdict;
  std::map<std::string, int> exonerated_by_gate;
  std::map<std::string, int> actionable_by_class;  // unexplained verdicts only
};
VerdictSummary summarize(const std::vector<DriftVerdict>& verdicts);

// The pairing of the reference's shadow drift report: consecutive snapshots of a table inside the
// window (same_table), and consecutive versions of a resource identity whose table name changed
// (version, not windowed). Pointers refer into the vectors passed in.
struct PairVerdict {
  std::string kind;  // same_table | version
  const StoredSnapshot* before = nullptr;
  const StoredSnapshot* after = nullptr;
  bool evaluated = false;  // false: a columns_profile could not be read; the pair is skipped
  DriftVerdict verdict;
};
std::vector<PairVerdict> pair_and_classify(const std::vector<StoredSnapshot>& window,
                                           const std::vector<StoredSnapshot>& versioned, const DiffOptions& opt = {});
// window_days, coverage, pairs_found, pairs_by_kind, the summary fields, by_kind, up to
// max_examples actionable examples, mode "shadow".
nlohmann::json drift_report_json(const std::vector<StoredSnapshot>& window, const std::vector<PairVerdict>& pairs,
                                 int days, size_t max_examples = 20);

nlohmann::json to_json(const DriftVerdict& v);
nlohmann::json to_json(const VerdictSummary& s);

}  // namespace predrop::evidence
