// The diff of two snapshots of a table, as the reference application's diff_snapshots: which columns appeared, disappeared,
// changed type or were probably renamed, and which provenance fields differ. Pure: no database,
// no clock. The rename matcher reproduces the reference (identifiability gate, 0.7/0.2/0.1
// similarity, uniqueness rule) and offers a profile-based method behind DiffOptions::method.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "capture/snapshot.hpp"

namespace predrop::evidence {

// The five provenance fields a snapshot row carries (reference 0057).
struct Provenance {
  std::optional<std::string> parser_version, normalization_version, layout_profile, header_quality;
  std::optional<bool> is_truncated;
};

// A snapshot as the store holds it: the row, with columns_profile rehydrated.
struct StoredSnapshot {
  std::string id;
  std::string schema_name, table_name;
  std::string database_name;
  std::optional<std::string> resource_identity;
  std::optional<int> version;
  std::string reason, actor;
  std::string captured_at;               // ISO 8601 text as the server printed it (UTC)
  int column_count = 0;
  std::optional<int64_t> row_count_estimate;
  std::string schema_hash;
  std::vector<capture::ColumnProfile> columns;
  bool profile_ok = true;                // false: columns_profile could not be parsed
  bool stats_available = false;
  std::string extra_json;                // "" when NULL
  Provenance provenance;
  std::optional<std::string> drop_outcome;
  std::optional<int64_t> table_oid;
  // Before/after pairs (migration 0002): the before an after completes, and for a post_analyze
  // the after whose profile it is (extra->>'profile_of').
  std::optional<std::string> pair_of;
  std::optional<std::string> profile_of;
};

// post_create, post_alter, post_analyze: a shape after a statement. Anything else (pre_drop,
// baseline, the reference's own reasons) is a before.
bool is_after(const StoredSnapshot& s);
// Both snapshots are of one relation: same database and table OID, so the columns' attnums are
// their identity and a rename is read from them, not guessed from values.
bool same_relation(const StoredSnapshot& a, const StoredSnapshot& b);

enum class RenameMethod {
  reference,  // openarg §5.3: 0.7 Jaccard + 0.2 type + 0.1 null agreement; >1 candidate = ambiguous
  // "profile" (alias "profile+"): exact value overlap, plus (for less) agreement of the shape:
  // numeric range and the histogram quantiles' rank alignment, which survive value drift; MCV
  // rank, n_distinct; a clear winner resolves ties, and an added column goes to one claimant.
  // Then columns the gate excludes, on weaker labelled evidence (RenameCandidate::evidence).
  profile,
};

struct DiffOptions {
  double rename_threshold = 0.6;              // RENAME_THRESHOLD
  int min_identifiable_values = 4;            // MIN_IDENTIFIABLE_VALUES
  double max_identifiable_null_frac = 0.95;   // MAX_IDENTIFIABLE_NULL_FRAC
  std::vector<std::string> empty_markers = {"", "-", "s/d", "sd", "n/a", "na", "null", "none", "."};
  // Used only when a snapshot carries no schema_hash (the hash decides schema_changed).
  std::vector<std::string> hash_excluded = {"_source_dataset_id", "_ingested_at", "_source_url"};
  RenameMethod method = RenameMethod::reference;
  // profile method: several candidates above the threshold resolve to the best one when it leads
  // the runner-up by at least this much; otherwise the case is ambiguous, as in the reference.
  double profile_margin = 0.08;
  // profile method, columns the gate excludes: null fractions this close count as the same.
  double low_card_null_tolerance = 0.05;
};

struct TypeChange {
  std::string column, from, to;
};
struct RenameCandidate {
  std::string from, to;
  double similarity = 0;  // rounded to 3 decimals
  // What the match rests on; "" for the reference method. The profile method's labels, strongest
  // first: "profile" (the values' profile scored above the threshold), "value_set+position" (a
  // column the gate excludes whose whole value set, type and null fraction reappear under the one
  // new name in the same place; fixed score kValueSetScore), "position+name" (an empty or
  // marker-only column: same place, same type, related name; fixed score kPositionNameScore).
  // Either method: "attnum" when both snapshots are of one relation (same_relation) and the
  // column kept its attnum under a new name; certain, similarity 1.
  std::string evidence;
};
inline constexpr double kValueSetScore = 0.5;
inline constexpr double kPositionNameScore = 0.4;
struct AmbiguousRename {
  struct Candidate {
    std::string to;
    double similarity = 0;
  };
  std::string from;
  std::vector<Candidate> candidates;  // highest first
};

struct SnapshotDiff {
  bool schema_changed = false;
  std::vector<std::string> added;     // sorted (code point); renamed columns stay listed
  std::vector<std::string> removed;   // sorted
  std::vector<TypeChange> type_changed;  // in the after snapshot's column order
  std::vector<RenameCandidate> renamed_candidates;
  std::vector<AmbiguousRename> ambiguous_renames;
  std::vector<std::string> provenance_changed;  // both sides non-null and different
};

// G5: enough meaningful values to be matched at all (markers and near-empty columns are not).
bool is_identifiable(const capture::ColumnProfile& c, const DiffOptions& opt = {});
// The reference's score in [0, 1]; 0.0 when either side has no values.
double profile_similarity(const capture::ColumnProfile& left, const capture::ColumnProfile& right);
// The profile method's score in [0, 1]; 0.0 when either side has no values.
double profile_similarity_v2(const capture::ColumnProfile& left, const capture::ColumnProfile& right);

SnapshotDiff diff_snapshots(const StoredSnapshot& before, const StoredSnapshot& after, const DiffOptions& opt = {});

nlohmann::json to_json(const SnapshotDiff& d);
const char* to_string(RenameMethod m);
std::optional<RenameMethod> rename_method_from_string(const std::string& s);

}  // namespace predrop::evidence
