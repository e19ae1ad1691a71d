#include "cli/diff_text.hpp"

#include <set>

namespace predrop::cli {

using namespace predrop::capture;
using namespace predrop::evidence;

void print_diff(std::ostream& out, const SnapshotDiff& d, const Paint& p, const std::string& indent) {
  std::set<std::string> renamed_from, renamed_to;
  for (const auto& r : d.renamed_candidates) {
    renamed_from.insert(r.from);
    renamed_to.insert(r.to);
  }
  for (const auto& r : d.renamed_candidates)
    out << indent << p.cyan(r.from + " \u2192 " + r.to + " (" + fmt(r.similarity, 2) + ")")
        << (r.evidence.empty() || r.evidence == "profile" ? "" : "  " + p.dim("by " + r.evidence)) << "\n";
  for (const auto& a : d.added)
    if (!renamed_to.count(a)) out << indent << p.green("+ " + a) << "\n";
  for (const auto& r : d.removed)
    if (!renamed_from.count(r)) out << indent << p.red("- " + r) << "\n";
  for (const auto& t : d.type_changed) out << indent << p.yellow("~ " + t.column + ": " + t.from + " \u2192 " + t.to) << "\n";
  for (const auto& a : d.ambiguous_renames) {
    std::vector<std::string> c;
    for (const auto& k : a.candidates) c.push_back(k.to + " (" + fmt(k.similarity, 2) + ")");
    out << indent << p.yellow("? " + a.from + " \u2192 one of " + join(c)) << "  " << p.dim("ambiguous: not guessed") << "\n";
  }
  if (!d.provenance_changed.empty()) out << indent << p.dim("provenance changed: " + join(d.provenance_changed)) << "\n";
}

std::string verdict_text(const DriftVerdict& v, const Paint& p) {
  std::string s = v.verdict;
  if (!v.change_class.empty()) s += " (" + v.change_class + ")";
  if (!v.exonerated_by.empty()) s += " by " + v.exonerated_by;
  s = v.is_actionable ? p.bold(p.red(s)) : p.bold(s);
  s += " \u2014 " + v.reason;
  if (!v.gates_not_evaluated.empty()) s += p.dim(" [not evaluated: " + join(v.gates_not_evaluated) + "]");
  return s;
}

std::string change_summary(const SnapshotDiff& d) { return change_summary(to_json(d)); }

std::string change_summary(const nlohmann::json& d) {
  std::set<std::string> renamed_from, renamed_to;
  std::vector<std::string> renamed, added, removed, retyped;
  for (const auto& r : d.value("renamed_candidates", nlohmann::json::array())) {
    renamed_from.insert(r["from"].get<std::string>());
    renamed_to.insert(r["to"].get<std::string>());
    std::string by = r.value("evidence", "");
    renamed.push_back(r["from"].get<std::string>() + " \u2192 " + r["to"].get<std::string>() +
                      (by.empty() ? " (" + fmt(r["similarity"].get<double>(), 2) + ")" : " (by " + by + ")"));
  }
  for (const auto& a : d.value("added", nlohmann::json::array()))
    if (!renamed_to.count(a.get<std::string>())) added.push_back(a.get<std::string>());
  for (const auto& r : d.value("removed", nlohmann::json::array()))
    if (!renamed_from.count(r.get<std::string>())) removed.push_back(r.get<std::string>());
  for (const auto& t : d.value("type_changed", nlohmann::json::array()))
    retyped.push_back(t["column"].get<std::string>() + ": " + t["from"].get<std::string>() + " \u2192 " + t["to"].get<std::string>());
  std::vector<std::string> parts;
  if (!added.empty()) parts.push_back("added " + join(added));
  if (!removed.empty()) parts.push_back("removed " + join(removed));
  if (!renamed.empty()) parts.push_back("renamed " + join(renamed));
  if (!retyped.empty()) parts.push_back("type changed " + join(retyped));
  size_t ambiguous = d.value("ambiguous_renames", nlohmann::json::array()).size();
  if (ambiguous) parts.push_back(std::to_string(ambiguous) + " ambiguous rename(s)");
  return parts.empty() ? "no column change" : join(parts, "; ");
}

}  // namespace predrop::cli
