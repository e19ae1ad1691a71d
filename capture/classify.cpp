// The cascade in the newest reference order (599aec3): G0, G2, no-change, G1, attributability,
// G3, fall-through. G0/G2 come before no-change on purpose (FR-005): a pair that is not the same
// dataset says nothing about drift even when the shapes agree.
#include "capture/classify.hpp"

#include <algorithm>
#include <cctype>

namespace predrop::capture {

namespace {

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

bool contains(const std::vector<std::string>& v, const char* s) { return std::find(v.begin(), v.end(), s) != v.end(); }

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + v[i];
  return out;
}

std::string change_class(const SnapshotDiff& d) {
  if (!d.renamed_candidates.empty()) return "rename";
  if (!d.added.empty() && !d.removed.empty()) return "reshape";
  if (!d.added.empty()) return "additive";
  if (!d.removed.empty()) return "removal";
  if (!d.type_changed.empty()) return "type_change";
  return "semantic";  // practically unreachable (DEBT-024-002)
}

std::string describe(const SnapshotDiff& d, const std::string& cls) {
  std::string s = "change survived every gate (" + cls + ")";
  if (!d.renamed_candidates.empty()) {
    s += ": renamed ";
    for (size_t i = 0; i < d.renamed_candidates.size(); ++i)
      s += (i ? ", " : "") + d.renamed_candidates[i].from + " -> " + d.renamed_candidates[i].to;
  } else if (!d.added.empty() || !d.removed.empty()) {
    s += ":";
    if (!d.added.empty()) s += " added " + join(d.added);
    if (!d.removed.empty()) s += (d.added.empty() ? " removed " : "; removed ") + join(d.removed);
  } else if (!d.type_changed.empty()) {
    s += ": " + d.type_changed[0].column + " " + d.type_changed[0].from + " -> " + d.type_changed[0].to;
  }
  return s;
}

DriftVerdict exonerate(DriftVerdict v, const char* gate, std::string reason) {
  v.verdict = "exonerated";
  v.exonerated_by = gate;
  v.reason = std::move(reason);
  return v;
}

}  // namespace

bool is_real_provenance(const std::optional<std::string>& v) {
  if (!v || v->empty() || *v == "unavailable" || *v == "legacy:unknown") return false;
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t pos; (pos = v->find('-', start)) != std::string::npos; start = pos + 1) parts.push_back(v->substr(start, pos - start));
  parts.push_back(v->substr(start));
  if (parts.size() == 3 && std::all_of(parts.begin(), parts.end(), all_digits)) return false;
  return true;
}

DriftVerdict classify_change(const StoredSnapshot& before, const StoredSnapshot& after, const DriftContext& ctx,
                             const DiffOptions& opt) {
  DriftVerdict v;
  v.diff = diff_snapshots(before, after, opt);
  const auto& d = v.diff;

  if (ctx.same_identity == false) {
    v.gates_not_evaluated.clear();  // returned with an empty list, as the reference does
    return exonerate(std::move(v), "G0_identity", "the two snapshots belong to different resource identities");
  }
  if (!ctx.same_identity) v.gates_not_evaluated.push_back("G0_identity");
  if (ctx.same_source_url == false)
    return exonerate(std::move(v), "G2_sibling", "the two snapshots come from different source URLs (sibling variants)");
  if (!ctx.same_source_url) v.gates_not_evaluated.push_back("G2_sibling");

  if (!d.schema_changed && d.type_changed.empty()) {
    v.verdict = "no_change";
    v.reason = "same column set and types";
    return v;
  }
  if (contains(d.provenance_changed, "parser_version") || contains(d.provenance_changed, "normalization_version")) {
    return exonerate(std::move(v), "G1_provenance",
                     "parser or normalisation changed between the snapshots: our pipeline, not the source");
  }
  // After the G1 test on purpose: a placeholder-vs-real difference above still exonerates.
  if (!(is_real_provenance(before.provenance.parser_version) && is_real_provenance(after.provenance.parser_version))) {
    v.gates_not_evaluated.push_back("G1_provenance");
    v.verdict = "unattributable";
    v.reason = "parser provenance unknown on at least one side: the change cannot be attributed";
    return v;
  }
  if (contains(d.provenance_changed, "layout_profile") || contains(d.provenance_changed, "header_quality") ||
      contains(d.provenance_changed, "is_truncated")) {
    return exonerate(std::move(v), "G3_pipeline", "layout, header quality or truncation changed: a pipeline decision");
  }
  v.verdict = "unexplained";
  v.change_class = change_class(d);
  v.reason = describe(d, v.change_class);
  v.is_actionable = true;
  return v;
}

VerdictSummary summarize(const std::vector<DriftVerdict>& verdicts) {
  VerdictSummary s;
  for (const auto& v : verdicts) {
    ++s.evaluated;
    ++s.by_verdict[v.verdict];
    if (!v.exonerated_by.empty()) ++s.exonerated_by_gate[v.exonerated_by];
    if (v.is_actionable) {
      ++s.actionable;
      ++s.actionable_by_class[v.change_class];
    }
  }
  return s;
}

nlohmann::json to_json(const DriftVerdict& v) {
  nlohmann::json j;
  j["verdict"] = v.verdict;
  j["change_class"] = v.change_class.empty() ? nlohmann::json(nullptr) : nlohmann::json(v.change_class);
  j["exonerated_by"] = v.exonerated_by.empty() ? nlohmann::json(nullptr) : nlohmann::json(v.exonerated_by);
  j["reason"] = v.reason;
  j["is_actionable"] = v.is_actionable;
  j["gates_not_evaluated"] = v.gates_not_evaluated;
  j["diff"] = to_json(v.diff);
  return j;
}

nlohmann::json to_json(const VerdictSummary& s) {
  return {{"evaluated", s.evaluated},
          {"actionable", s.actionable},
          {"by_verdict", s.by_verdict},
          {"exonerated_by_gate", s.exonerated_by_gate},
          {"actionable_by_class", s.actionable_by_class}};
}

}  // namespace predrop::capture
