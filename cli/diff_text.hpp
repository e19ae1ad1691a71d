// The text form of a diff and a verdict, the way a reviewer reads them: + added (green),
// - removed (red), ~ retyped, old → new (0.93) for renames, ? for ambiguous ones.
#pragma once

#include <ostream>
#include <string>

#include "evidence/drift.hpp"
#include "cli/evidence_support.hpp"

namespace predrop::cli {

void print_diff(std::ostream& out, const evidence::SnapshotDiff& d, const Paint& p, const std::string& indent = "  ");
std::string verdict_text(const evidence::DriftVerdict& v, const Paint& p);
// One line: "added a, b; removed c; renamed x → y (by attnum); type changed n: integer → bigint",
// or "no column change". Renamed columns are not listed again as added or removed.
std::string change_summary(const evidence::SnapshotDiff& d);
// The same from a diff's JSON (to_json(SnapshotDiff), or a report's "changes" entry).
std::string change_summary(const nlohmann::json& d);

}  // namespace predrop::cli
