// Drift classification (the reference application's spec 024 exoneration cascade): a cascade of gates that can only exonerate a
// diff or abstain, never accuse; whatever survives every gate is "unexplained" and actionable.
// Pure: no database, clock or network.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
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

// Before/after pairs (store version 2). An after names the before it completes in pair_of; the
// pair's after is the newest post_create/post_alter of that before, or the post_analyze that
// profiles it (extra profile_of) once there is one. Pointers refer into the vector passed in.
struct CompletePair {
  const StoredSnapshot* before = nullptr;
  const StoredSnapshot* after = nullptr;
  bool waiting_for_stats = false;  // the after has no statistics and no post_analyze yet
};
struct Pairing {
  std::vector<CompletePair> pairs;               // by the after's captured_at
  // In no pair: befores nothing completes, afters whose before is not in the set (pair_of NULL:
  // a brand new table; or the before is gone), oldest first.
  std::vector<const StoredSnapshot*> unpaired;
  std::set<std::string> in_pair;                 // ids of befores and of every after of a pair
  std::set<std::string> superseded;              // afters a newer after (or its profile) replaces
};
Pairing find_pairs(const std::vector<StoredSnapshot>& snaps);

// The pairing of the reference's shadow drift report: consecutive snapshots of a table inside the
// window (same_table), and consecutive versions of a resource identity whose table name changed
// (version, not windowed). Pointers refer into the vectors passed in.
// With before/after pairs, each complete pair is one pair of kind before_after, and the
// consecutive same_table chain skips the afters (their before stands for them, then their
// shape is what the next snapshot is compared with).
struct PairVerdict {
  std::string kind;  // before_after | same_table | version
  const StoredSnapshot* before = nullptr;
  const StoredSnapshot* after = nullptr;
  bool evaluated = false;  // false: a columns_profile could not be read; the pair is skipped
  DriftVerdict verdict;
};
std::vector<PairVerdict> pair_and_classify(const std::vector<StoredSnapshot>& window,
                                           const std::vector<StoredSnapshot>& versioned, const DiffOptions& opt = {});
// window_days, coverage, pairs_found, pairs_by_kind, the summary fields, by_kind, up to
// max_examples actionable examples, mode "shadow"; complete_pairs, pairs_waiting_for_stats,
// unpaired_snapshots; "changes", every evaluated pair whose columns changed (at most
// max_changes, the rest counted in changes_left_off) whatever its verdict, and
// "gates_not_evaluated", each gate those pairs could not evaluate with how many.
nlohmann::json drift_report_json(const std::vector<StoredSnapshot>& window, const std::vector<PairVerdict>& pairs,
                                 int days, size_t max_examples = 20, size_t max_changes = 500);

nlohmann::json to_json(const DriftVerdict& v);
nlohmann::json to_json(const VerdictSummary& s);

}  // namespace predrop::evidence
