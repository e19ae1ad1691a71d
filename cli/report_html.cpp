#include "cli/report_html.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "cli/evidence_support.hpp"

namespace predrop::cli {

using namespace predrop::capture;
using namespace predrop::evidence;
using nlohmann::json;

namespace {

std::string esc(const std::string& s) {
  std::string o;
  for (char ch : s) {
    switch (ch) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += ch;
    }
  }
  return o;
}

std::string counts_table(const json& obj, const std::string& title) {
  std::string o = "<table><caption>" + esc(title) + "</caption>";
  if (obj.empty()) o += "<tr><td colspan=2 class=muted>none</td></tr>";
  // A string value is shown as itself (a timestamp), not as its JSON literal.
  for (auto it = obj.begin(); it != obj.end(); ++it)
    o += "<tr><th>" + esc(it.key()) + "</th><td>" + esc(it.value().is_string() ? it.value().get<std::string>() : it.value().dump()) +
         "</td></tr>";
  return o + "</table>";
}

// One table's shapes as an SVG grid: columns as rows, snapshots as columns; a cell is filled
// when the snapshot has the column (green when it appeared there), a dashed red outline where
// it disappeared; renames are curves from the old row to the new one.
// A before/after pair is joined by a bracket above its two heads.
std::string timeline_svg(const std::vector<const StoredSnapshot*>& snaps, const std::map<std::pair<std::string, std::string>, const PairVerdict*>& by_ids) {
  std::vector<std::string> rows;
  std::map<std::string, int> row_of;
  for (const auto* s : snaps) {
    auto cols = s->columns;
    std::stable_sort(cols.begin(), cols.end(), [](const auto& a, const auto& b) { return a.ordinal < b.ordinal; });
    for (const auto& c : cols)
      if (row_of.emplace(c.name, static_cast<int>(rows.size())).second) rows.push_back(c.name);
  }
  const int L = 190, W = 150, H = 22, top = 58;
  int width = L + W * static_cast<int>(snaps.size()) + 10, height = top + H * static_cast<int>(rows.size()) + 10;
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << width << "' height='" << height << "' viewBox='0 0 " << width << " " << height << "'>";
  for (size_t i = 0; i < rows.size(); ++i)
    o << "<text class='col' x='4' y='" << top + H * i + 15 << "'>" << esc(clip_chars(rows[i], 26)) << "</text>";
  for (size_t j = 0; j < snaps.size(); ++j) {
    const auto* s = snaps[j];
    int x = L + W * static_cast<int>(j);
    o << "<text class='head' x='" << x + 10 << "' y='16'>" << esc(s->id.substr(0, 8) + " " + s->reason) << "</text>";
    o << "<text class='sub' x='" << x + 10 << "' y='32'>" << esc(s->captured_at.substr(0, 16)) << "</text>";
    std::set<std::string> prev;
    if (j > 0)
      for (const auto& c : snaps[j - 1]->columns) prev.insert(c.name);
    std::set<std::string> here;
    for (const auto& c : s->columns) {
      here.insert(c.name);
      int y = top + H * row_of[c.name];
      o << "<rect class='" << (j > 0 && !prev.count(c.name) ? "new" : "cell") << "' x='" << x + 10 << "' y='" << y + 3
        << "' width='" << W - 20 << "' height='" << H - 6 << "' rx='3'><title>" << esc(c.name + " " + c.pg_type) << "</title></rect>";
      o << "<text class='type' x='" << x + 14 << "' y='" << y + 15 << "'>" << esc(clip_chars(c.pg_type, 20)) << "</text>";
    }
    for (const auto& n : prev)
      if (!here.count(n))
        o << "<rect class='gone' x='" << x + 10 << "' y='" << top + H * row_of[n] + 3 << "' width='" << W - 20 << "' height='" << H - 6 << "' rx='3'/>";
    for (size_t k = 0; k < j; ++k) {
      auto pit = by_ids.find({snaps[k]->id, s->id});
      if (pit == by_ids.end() || pit->second->kind != "before_after") continue;
      int xb = L + W * static_cast<int>(k) + W / 2, xa = x + W / 2;
      o << "<path class='pair' d='M" << xb << " 50 V40 H" << xa << " V50'><title>"
        << esc("pair: " + snaps[k]->reason + " " + short_id(snaps[k]->id) + " \u2192 " + s->reason + " " + short_id(s->id))
        << "</title></path>";
    }
    if (j == 0) continue;
    auto it = by_ids.find({snaps[j - 1]->id, s->id});
    if (it == by_ids.end() || !it->second->evaluated) continue;
    for (const auto& r : it->second->verdict.diff.renamed_candidates) {
      int y1 = top + H * row_of[r.from] + H / 2, y2 = top + H * row_of[r.to] + H / 2;
      int x1 = x - 10, x2 = x + 10;
      o << "<path class='rename' d='M" << x1 - W + 20 << " " << y1 << " C" << x1 + 5 << " " << y1 << " " << x2 - 15 << " " << y2 << " " << x2 << " " << y2
        << "'><title>" << esc(r.from + " \u2192 " + r.to + " (" + fmt(r.similarity, 2) + ")") << "</title></path>";
      o << "<text class='sim' x='" << x - 8 << "' y='" << (y1 + y2) / 2 - 3 << "'>" << fmt(r.similarity, 2) << "</text>";
    }
  }
  o << "</svg>";
  return o.str();
}

// The weekly rate as bars: per week, the tables seen recreated or altered, and in front of them
// those whose shape changed. Each week's group carries its numbers (data-*) as the JSON report
// has them, so the chart can be checked against it.
std::string rate_chart_svg(const json& weekly) {
  int top = 0;
  for (const auto& w : weekly) top = std::max(top, w["tables_seen"].get<int>());
  const int L = 44, B = 14, gap = 10, H = 160, T = 28, bottom = T + H;
  const int n = static_cast<int>(weekly.size());
  // Wide enough for the legend however few the weeks.
  int width = std::max(L + (B * 2 + gap) * std::max(n, 1) + 20, L + 300), height = bottom + 52;
  // The weeks share the plot's whole width: a short window's few weeks are spread, not left-packed.
  const int step = (width - L - 20) / std::max(n, 1), pad = (step - B * 2 - gap) / 2;
  int scale = std::max(top, 1);
  std::ostringstream o;
  o << "<svg class='rate' xmlns='http://www.w3.org/2000/svg' width='" << width << "' height='" << height << "' viewBox='0 0 " << width
    << " " << height << "' role='img' aria-label='tables seen recreated or altered, and those that changed shape, by week'>";
  o << "<rect class='seen' x='" << L << "' y='6' width='10' height='10'/><text class='sub' x='" << L + 14
    << "' y='15'>seen recreated or altered</text>";
  o << "<rect class='changed' x='" << L + 180 << "' y='6' width='10' height='10'/><text class='sub' x='" << L + 194
    << "' y='15'>changed shape</text>";
  o << "<line class='axis' x1='" << L - 4 << "' y1='" << bottom << "' x2='" << width - 10 << "' y2='" << bottom << "'/>";
  o << "<line class='grid' x1='" << L - 4 << "' y1='" << T << "' x2='" << width - 10 << "' y2='" << T << "'/>";
  o << "<text class='sub' x='" << L - 8 << "' y='" << T + 4 << "' text-anchor='end'>" << top << "</text>";
  o << "<text class='sub' x='" << L - 8 << "' y='" << bottom + 4 << "' text-anchor='end'>0</text>";
  for (int i = 0; i < n; ++i) {
    const auto& w = weekly[i];
    int seen = w["tables_seen"].get<int>(), changed = w["tables_changed_shape"].get<int>();
    int x = L + step * i + pad;
    int hs = seen * H / scale, hc = changed * H / scale;
    std::string week = w["week"].get<std::string>();
    o << "<g class='week' data-week='" << esc(week) << "' data-seen='" << seen << "' data-changed='" << changed << "'><title>"
      << esc("week of " + week + ": " + std::to_string(seen) + " seen recreated or altered, " + std::to_string(changed) +
             " changed shape")
      << "</title>";
    o << "<rect class='seen' x='" << x << "' y='" << bottom - hs << "' width='" << B << "' height='" << hs << "'/>";
    o << "<rect class='changed' x='" << x + B << "' y='" << bottom - hc << "' width='" << B << "' height='" << hc << "'/>";
    // Every week is labelled while they fit; past 16 weeks, every fourth.
    if (n <= 16 || i % 4 == 0)
      o << "<text class='sub' transform='translate(" << x + B << " " << bottom + 10 << ") rotate(45)'>" << esc(week.substr(5)) << "</text>";
    o << "</g>";
  }
  o << "</svg>";
  return o.str();
}

std::string rate_section(const json& rate) {
  std::ostringstream o;
  const auto& ov = rate["overall"];
  o << "<section class=rate><h2>rate of change</h2><p>";
  if (ov["tables_seen"] == 0) {
    o << "no table seen recreated or altered in the last " << rate["window_days"] << " days";
  } else {
    o << ov["tables_seen"] << " table(s) seen recreated or altered in the last " << rate["window_days"] << " days; "
      << ov["tables_changed_shape"] << " of them changed shape (" << static_cast<int>(ov["share_changed"].get<double>() * 100 + 0.5)
      << "%)";
  }
  o << "</p><table><caption>by schema</caption><tr><th>schema</th><th>seen</th><th>changed shape</th><th>added a column</th>"
       "<th>removed one</th><th>renamed one</th><th>changed a type</th></tr>";
  auto row = [&](const std::string& name, const json& t) {
    o << "<tr><th>" << esc(name) << "</th>";
    for (const char* k : {"tables_seen", "tables_changed_shape", "added", "removed", "renamed", "type_changed"}) o << "<td>" << t[k] << "</td>";
    o << "</tr>";
  };
  for (const auto& [schema, t] : rate["by_schema"].items()) row(schema, t);
  row("all", ov);
  o << "</table>" << rate_chart_svg(rate["weekly"]) << "</section>";
  return o.str();
}

}  // namespace

// Self-contained: inline CSS and SVG, no script, no external resource.
std::string render_report_html(const json& r, const std::vector<StoredSnapshot>& window, const std::vector<PairVerdict>& pairs) {
  std::ostringstream o;
  o << "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>predrop drift report</title><style>"
       "body{font:14px system-ui,sans-serif;margin:24px;color:#1d2330;background:#fafbfc}h1{font-size:22px}"
       "table{border-collapse:collapse;margin:0 16px 16px 0;display:inline-table;vertical-align:top;background:#fff}"
       "caption{font-weight:600;text-align:left;padding:4px 0}th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left}"
       ".muted{color:#8b949e}.actionable{color:#b42318;font-weight:600}section{margin:24px 0;overflow-x:auto}"
       "svg{background:#fff;border:1px solid #d0d7de}.col{font:12px monospace;fill:#1d2330}.head{font:600 12px sans-serif;fill:#1d2330}"
       ".sub,.sim{font:11px sans-serif;fill:#57606a}.type{font:11px monospace;fill:#1d2330}.cell{fill:#dbe7f5}"
       ".new{fill:#b7e4c7}.gone{fill:none;stroke:#d1242f;stroke-dasharray:4 3}.rename{fill:none;stroke:#8250df;stroke-width:2}"
       ".pair{fill:none;stroke:#1f6feb;stroke-width:2}svg.rate .seen{fill:#9ec5fe}svg.rate .changed{fill:#d1242f}"
       ".axis{stroke:#57606a}.grid{stroke:#d0d7de;stroke-dasharray:3 3}"
       "</style></head><body>";
  o << "<h1>predrop drift report</h1><p class=muted>last " << r["window_days"] << " days, mode " << esc(r["mode"].get<std::string>())
    << ", rename method " << esc(r.value("method", "reference")) << "</p>";
  if (r["actionable"] > 0) o << "<p class=actionable>" << r["actionable"] << " change(s) survived every gate</p>";
  json cov = r["coverage"];
  for (auto& [k, v] : cov.items()) if (v.is_null()) v = "-";
  o << "<section>" << counts_table(cov, "coverage") << counts_table(r["pairs_by_kind"], "pairs by kind")
    << counts_table(r["by_verdict"], "verdicts") << counts_table(r["exonerated_by_gate"], "exonerations by gate")
    << counts_table(r["actionable_by_class"], "actionable by class")
    << counts_table({{"complete", r["complete_pairs"]}, {"waiting for statistics", r["pairs_waiting_for_stats"]},
                     {"unpaired snapshots", r["unpaired_snapshots"]}},
                    "before/after pairs")
    << "</section>";
  if (r.contains("rate")) o << rate_section(r["rate"]);
  // Every pair whose columns changed, whatever its verdict: an unattributable change is still a
  // change a reader has to know about. The verdict is a column of its own.
  o << "<section><table class=changes><caption>changes (" << r["changes"].size()
    << ")</caption><tr><th>table</th><th>kind</th><th>before \u2192 after</th><th>verdict</th><th>added</th><th>removed</th>"
       "<th>renamed</th><th>type changed</th></tr>";
  if (r["changes"].empty()) o << "<tr><td colspan=8 class=muted>no column change</td></tr>";
  for (const auto& c : r["changes"]) {
    std::set<std::string> from, to;
    std::vector<std::string> ren, add, rem, typ;
    for (const auto& rc : c["renamed_candidates"]) {
      from.insert(rc["from"].get<std::string>());
      to.insert(rc["to"].get<std::string>());
      std::string by = rc.value("evidence", "");
      ren.push_back(rc["from"].get<std::string>() + " \u2192 " + rc["to"].get<std::string>() +
                    (by.empty() ? " (" + fmt(rc["similarity"].get<double>(), 2) + ")" : " (by " + by + ")"));
    }
    for (const auto& a : c["added"])
      if (!to.count(a.get<std::string>())) add.push_back(a.get<std::string>());
    for (const auto& a : c["removed"])
      if (!from.count(a.get<std::string>())) rem.push_back(a.get<std::string>());
    for (const auto& t : c["type_changed"])
      typ.push_back(t["column"].get<std::string>() + ": " + t["from"].get<std::string>() + " \u2192 " + t["to"].get<std::string>());
    std::string verdict = c["verdict"].get<std::string>();
    if (!c["change_class"].is_null()) verdict += " (" + c["change_class"].get<std::string>() + ")";
    o << "<tr><td>" << esc(c["table"]) << "</td><td>" << esc(c["pair_kind"]) << "</td><td>"
      << esc(c["before_reason"].get<std::string>() + " " + short_id(c["before_id"]) + " \u2192 " + c["after_reason"].get<std::string>() +
             " " + short_id(c["after_id"]))
      << "</td><td" << (verdict.rfind("unexplained", 0) == 0 ? " class=actionable" : "") << ">" << esc(verdict) << "</td><td>"
      << esc(join(add)) << "</td><td>" << esc(join(rem)) << "</td><td>" << esc(join(ren)) << "</td><td>" << esc(join(typ))
      << "</td></tr>";
  }
  o << "</table>";
  if (r["changes_left_off"] > 0) o << "<p class=muted>and " << r["changes_left_off"] << " more, not listed</p>";
  if (!r["gates_not_evaluated"].empty()) {
    std::vector<std::string> g;
    for (auto it = r["gates_not_evaluated"].begin(); it != r["gates_not_evaluated"].end(); ++it)
      g.push_back(it.key() + " (" + it.value().dump() + " of them)");
    o << "<p class=muted>gates not evaluated for these pairs: " << esc(join(g)) << "</p>";
  }
  o << "</section>";
  std::map<std::pair<std::string, std::string>, const PairVerdict*> by_ids;
  for (const auto& p : pairs) by_ids[{p.before->id, p.after->id}] = &p;
  // Timelines: tables with at least two snapshots, at most 50 tables and their last 12 shapes.
  std::map<std::string, std::vector<const StoredSnapshot*>> by_table;
  // A pair's superseded afters (a post_create its post_analyze replaces) are not drawn.
  auto pairing = find_pairs(window);
  for (const auto& s : window)
    if (!pairing.superseded.count(s.id)) by_table[s.schema_name + "." + s.table_name].push_back(&s);
  int shown = 0;
  o << "<h2>timelines</h2>";
  for (auto& [name, snaps] : by_table) {
    if (snaps.size() < 2 || ++shown > 50) continue;
    if (snaps.size() > 12) snaps.erase(snaps.begin(), snaps.end() - 12);
    o << "<section><h3>" << esc(name) << "</h3>" << timeline_svg(snaps, by_ids) << "</section>";
  }
  if (shown == 0) o << "<p class=muted>no table captured twice in the window</p>";
  o << "</body></html>\n";
  return o.str();
}

}  // namespace predrop::cli
