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

}  // namespace predrop::cli
