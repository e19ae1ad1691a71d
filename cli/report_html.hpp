// `predrop report --format html`: one self-contained page (inline CSS and SVG, no script, no
// network) with the summary and a per-table timeline of shapes.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "evidence/drift.hpp"

namespace predrop::cli {

// report: drift_report_json's summary (plus "method"); window: the snapshots it covers; pairs:
// their classified pairs, whose renames the timelines draw.
std::string render_report_html(const nlohmann::json& report, const std::vector<evidence::StoredSnapshot>& window,
                               const std::vector<evidence::PairVerdict>& pairs);

}  // namespace predrop::cli
