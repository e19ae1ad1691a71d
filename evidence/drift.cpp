// The cascade in the newest reference order (599aec3): G0, G2, no-change, G1, attributability,
// G3, fall-through. G0/G2 come before no-change on purpose (FR-005): a pair that is not the same
// dataset says nothing about drift even when the shapes agree.
#include "evidence/drift.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

namespace predrop::evidence {

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

namespace {

std::optional<bool> same_if_known(const std::optional<std::string>& a, const std::optional<std::string>& b) {
  if (!a || !b) return std::nullopt;
  return *a == *b;
}

// with_provenance: a parser_version that is neither legacy:unknown nor a bare YYYY-MM-DD.
bool report_provenance(const std::optional<std::string>& p) {
  if (!p || *p == "legacy:unknown") return false;
  const std::string& v = *p;
  bool bare_date = v.size() == 10 && v[4] == '-' && v[7] == '-' && all_digits(v.substr(0, 4)) &&
                   all_digits(v.substr(5, 2)) && all_digits(v.substr(8, 2));
  return !bare_date;
}

void classify_pair(PairVerdict& p, const DriftContext& ctx, const DiffOptions& opt) {
  p.evaluated = p.before->profile_ok && p.after->profile_ok;
  if (p.evaluated) p.verdict = classify_change(*p.before, *p.after, ctx, opt);
}

}  // namespace

Pairing find_pairs(const std::vector<StoredSnapshot>& snaps) {
  Pairing out;
  std::map<std::string, const StoredSnapshot*> by_id;
  for (const auto& s : snaps) by_id[s.id] = &s;
  auto later = [](const StoredSnapshot* a, const StoredSnapshot* b) {
    return !b || a->captured_at > b->captured_at || (a->captured_at == b->captured_at && a->id > b->id);
  };
  std::map<std::string, std::vector<const StoredSnapshot*>> afters_of;
  for (const auto& s : snaps) {
    if (!is_after(s)) continue;
    if (s.pair_of) {
      auto it = by_id.find(*s.pair_of);
      if (it != by_id.end() && !is_after(*it->second)) {
        afters_of[*s.pair_of].push_back(&s);
        continue;
      }
    }
    // An unpaired after's own profile: the newer row stands for both.
    if (s.reason == "post_analyze" && s.profile_of && by_id.count(*s.profile_of)) out.superseded.insert(*s.profile_of);
  }
  for (const auto& [before_id, afters] : afters_of) {
    const StoredSnapshot* shape = nullptr;  // newest post_create / post_alter
    for (const auto* a : afters)
      if (a->reason != "post_analyze" && later(a, shape)) shape = a;
    const StoredSnapshot* profile = nullptr;  // its post_analyze
    for (const auto* a : afters) {
      if (a->reason != "post_analyze") continue;
      bool of_shape = !shape || (a->profile_of ? *a->profile_of == shape->id : a->captured_at >= shape->captured_at);
      if (of_shape && later(a, profile)) profile = a;
    }
    CompletePair p{by_id[before_id], profile ? profile : shape, false};
    if (!p.after) continue;
    p.waiting_for_stats = p.after->reason != "post_analyze" && !p.after->stats_available;
    out.in_pair.insert(before_id);
    for (const auto* a : afters) {
      out.in_pair.insert(a->id);
      if (a != p.after) out.superseded.insert(a->id);
    }
    out.pairs.push_back(p);
  }
  std::sort(out.pairs.begin(), out.pairs.end(), [&](const CompletePair& x, const CompletePair& y) { return later(y.after, x.after); });
  std::vector<const StoredSnapshot*> rest;
  for (const auto& s : snaps)
    if (!out.in_pair.count(s.id) && !out.superseded.count(s.id)) rest.push_back(&s);
  std::stable_sort(rest.begin(), rest.end(), [&](const StoredSnapshot* x, const StoredSnapshot* y) { return later(y, x); });
  out.unpaired = std::move(rest);
  return out;
}

std::vector<PairVerdict> pair_and_classify(const std::vector<StoredSnapshot>& window,
                                           const std::vector<StoredSnapshot>& versioned, const DiffOptions& opt) {
  std::vector<PairVerdict> out;
  Pairing pairing = find_pairs(window);
  std::map<std::string, const StoredSnapshot*> after_of;
  for (const auto& cp : pairing.pairs) {
    after_of[cp.before->id] = cp.after;
    PairVerdict p{"before_after", cp.before, cp.after, false, {}};
    classify_pair(p, {same_if_known(cp.before->resource_identity, cp.after->resource_identity), std::nullopt}, opt);
    out.push_back(std::move(p));
  }
  // The chain of a table's shapes: a snapshot is compared with the one before it, where a before
  // that has a pair stands as its after's shape, and the afters themselves are not links.
  const StoredSnapshot* last = nullptr;
  for (size_t i = 0; i < window.size(); ++i) {
    const auto& cur = window[i];
    if (i > 0 && (window[i - 1].schema_name != cur.schema_name || window[i - 1].table_name != cur.table_name)) last = nullptr;
    if (pairing.superseded.count(cur.id) || (is_after(cur) && pairing.in_pair.count(cur.id))) continue;
    if (last) {
      PairVerdict p{"same_table", last, &cur, false, {}};
      classify_pair(p, {same_if_known(last->resource_identity, cur.resource_identity), std::nullopt}, opt);
      out.push_back(std::move(p));
    }
    last = &cur;
    if (auto it = after_of.find(cur.id); it != after_of.end())
      last = it->second->schema_name == cur.schema_name && it->second->table_name == cur.table_name ? it->second : nullptr;
  }
  for (size_t i = 1; i < versioned.size(); ++i) {
    const auto &prev = versioned[i - 1], &cur = versioned[i];
    if (prev.resource_identity != cur.resource_identity || prev.table_name == cur.table_name) continue;
    PairVerdict p{"version", &prev, &cur, false, {}};
    classify_pair(p, {true, std::nullopt}, opt);  // same identity by construction
    out.push_back(std::move(p));
  }
  return out;
}

nlohmann::json drift_report_json(const std::vector<StoredSnapshot>& window, const std::vector<PairVerdict>& pairs,
                                 int days, size_t max_examples, size_t max_changes) {
  nlohmann::json r;
  r["window_days"] = days;
  std::set<std::pair<std::string, std::string>> tables;
  int with_stats = 0, with_prov = 0, with_any = 0;
  std::string first, last;
  for (const auto& s : window) {
    tables.insert({s.schema_name, s.table_name});
    with_stats += s.stats_available;
    with_prov += report_provenance(s.provenance.parser_version);
    with_any += s.provenance.parser_version.has_value();
    if (first.empty() || s.captured_at < first) first = s.captured_at;
    if (last.empty() || s.captured_at > last) last = s.captured_at;
  }
  auto opt_text = [](const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); };
  r["coverage"] = {{"snapshots", window.size()}, {"tables", tables.size()}, {"with_stats", with_stats},
                   {"with_provenance", with_prov}, {"with_provenance_incl_placeholder", with_any},
                   {"first_seen", opt_text(first)}, {"last_seen", opt_text(last)}};
  r["pairs_found"] = pairs.size();
  std::vector<DriftVerdict> all;
  std::map<std::string, std::vector<DriftVerdict>> by_kind{{"same_table", {}}, {"version", {}}};
  if (std::any_of(pairs.begin(), pairs.end(), [](const PairVerdict& p) { return p.kind == "before_after"; })) by_kind["before_after"];
  nlohmann::json examples = nlohmann::json::array();
  for (const auto& p : pairs) {
    by_kind[p.kind];
    if (!p.evaluated) continue;
    all.push_back(p.verdict);
    by_kind[p.kind].push_back(p.verdict);
    if (!p.verdict.is_actionable || examples.size() >= max_examples) continue;
    const auto& d = p.verdict.diff;
    nlohmann::json ex = to_json(d);
    ex.erase("schema_changed");
    ex.erase("provenance_changed");
    ex["pair_kind"] = p.kind;
    ex["table"] = p.after->schema_name + "." + p.after->table_name;
    ex["compared_against"] = p.kind == "version" ? p.before->table_name : p.before->captured_at;
    ex["before_id"] = p.before->id;
    ex["after_id"] = p.after->id;
    ex["resource_identity"] = p.after->resource_identity ? nlohmann::json(*p.after->resource_identity) : nlohmann::json(nullptr);
    ex["change_class"] = p.verdict.change_class;
    ex["reason_dropped"] = p.after->reason;
    ex["gates_not_evaluated"] = p.verdict.gates_not_evaluated;
    examples.push_back(std::move(ex));
  }
  Pairing pairing = find_pairs(window);
  r["complete_pairs"] = pairing.pairs.size();
  r["pairs_waiting_for_stats"] = std::count_if(pairing.pairs.begin(), pairing.pairs.end(), [](const CompletePair& p) { return p.waiting_for_stats; });
  r["unpaired_snapshots"] = pairing.unpaired.size();
  // Whatever the verdict: an unattributable pair still changed, and a reader needs to see how.
  nlohmann::json changes = nlohmann::json::array();
  std::map<std::string, int> gates;
  size_t changes_left_off = 0;
  for (const auto& p : pairs) {
    if (!p.evaluated) continue;
    const auto& d = p.verdict.diff;
    if (!d.schema_changed && d.type_changed.empty()) continue;
    for (const auto& g : p.verdict.gates_not_evaluated) ++gates[g];
    if (changes.size() >= max_changes) {
      ++changes_left_off;
      continue;
    }
    nlohmann::json c = to_json(d);
    c.erase("schema_changed");
    c.erase("provenance_changed");
    c["pair_kind"] = p.kind;
    c["table"] = p.after->schema_name + "." + p.after->table_name;
    c["before_id"] = p.before->id;
    c["after_id"] = p.after->id;
    c["before_reason"] = p.before->reason;
    c["after_reason"] = p.after->reason;
    c["before_captured_at"] = p.before->captured_at;
    c["after_captured_at"] = p.after->captured_at;
    c["verdict"] = p.verdict.verdict;
    c["change_class"] = p.verdict.change_class.empty() ? nlohmann::json(nullptr) : nlohmann::json(p.verdict.change_class);
    changes.push_back(std::move(c));
  }
  r["changes"] = changes;
  r["changes_left_off"] = changes_left_off;
  r["gates_not_evaluated"] = gates;
  r["pairs_by_kind"] = nlohmann::json::object();
  nlohmann::json kinds = nlohmann::json::object();
  for (const auto& [k, v] : by_kind) {
    r["pairs_by_kind"][k] = std::count_if(pairs.begin(), pairs.end(), [&](const PairVerdict& p) { return p.kind == k; });
    kinds[k] = to_json(summarize(v));
  }
  r.update(to_json(summarize(all)));
  r["by_kind"] = kinds;
  r["examples"] = examples;
  r["mode"] = "shadow";
  return r;
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

}  // namespace predrop::evidence
