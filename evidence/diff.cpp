// The reference application's diff_snapshots, is_identifiable and profile_similarity in C++.
// Where the reference is quirky (markers filtered for the gate but not for
// the score; no exclusivity between renames) the quirk is kept, because stores are shared with it
// and verdicts must agree; the profile method is where predrop departs, and only when asked.
#include "evidence/diff.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

namespace predrop::evidence {

using namespace predrop::capture;

namespace {

using ValueSet = std::set<std::string>;

ValueSet values_of(const ColumnProfile& c) {
  ValueSet s(c.most_common_vals.begin(), c.most_common_vals.end());
  s.insert(c.histogram_sample.begin(), c.histogram_sample.end());
  return s;
}

std::string trim_lower(const std::string& v) {
  size_t b = 0, e = v.size();
  while (b < e && std::isspace(static_cast<unsigned char>(v[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(v[e - 1]))) --e;
  std::string out = v.substr(b, e - b);
  for (auto& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

double jaccard(const ValueSet& l, const ValueSet& r) {
  size_t inter = 0;
  for (const auto& v : l) inter += r.count(v);
  size_t uni = l.size() + r.size() - inter;
  return uni == 0 ? 0.0 : static_cast<double>(inter) / static_cast<double>(uni);
}

double null_agreement(const ColumnProfile& l, const ColumnProfile& r) {
  if (!l.null_frac || !r.null_frac) return 0.5;
  return 1.0 - std::min(std::fabs(*l.null_frac - *r.null_frac), 1.0);
}

double round3(double x) { return std::round(x * 1000.0) / 1000.0; }

// Every value parses as a finite number: the column's histogram can be compared as a range.
std::optional<std::vector<double>> as_numbers(const ValueSet& s) {
  std::vector<double> out;
  for (const auto& v : s) {
    if (v.empty()) return std::nullopt;
    char* end = nullptr;
    double d = std::strtod(v.c_str(), &end);
    if (!end || *end != '\0' || !std::isfinite(d)) return std::nullopt;
    out.push_back(d);
  }
  if (out.empty()) return std::nullopt;
  return out;
}

// Drift replaces histogram bounds by neighbouring numbers, so exact overlap collapses while the
// covered range barely moves: overlap of the [min, max] ranges over their union.
double numeric_range_overlap(const ValueSet& l, const ValueSet& r) {
  auto a = as_numbers(l), b = as_numbers(r);
  if (!a || !b || a->size() < 2 || b->size() < 2) return 0.0;
  auto [amin, amax] = std::minmax_element(a->begin(), a->end());
  auto [bmin, bmax] = std::minmax_element(b->begin(), b->end());
  double lo = std::max(*amin, *bmin), hi = std::min(*amax, *bmax);
  double ulo = std::min(*amin, *bmin), uhi = std::max(*amax, *bmax);
  if (uhi <= ulo) return 1.0;
  return hi <= lo ? 0.0 : (hi - lo) / (uhi - ulo);
}

// histogram_sample holds the lowest histogram bounds, i.e. equi-depth quantiles of each side.
// Drawn from one distribution, the two sequences interleave: each bound sits at the same rank
// fraction in the other sequence as in its own. Drift keeps most bounds in place while exact
// equality (Jaccard) collapses; unrelated columns land at rank 0 or 1 of each other. Numbers
// compare as numbers, everything else byte-wise (ISO dates, zero-padded codes order correctly).
double quantile_alignment(const std::vector<std::string>& l, const std::vector<std::string>& r) {
  if (l.size() < 4 || r.size() < 4) return 0.0;
  std::vector<std::string> all(l);
  all.insert(all.end(), r.begin(), r.end());
  auto nums = as_numbers(ValueSet(all.begin(), all.end()));
  auto less = [&](const std::string& a, const std::string& b) {
    if (nums) return std::strtod(a.c_str(), nullptr) < std::strtod(b.c_str(), nullptr);
    return a < b;
  };
  auto sorted = [&](std::vector<std::string> v) {
    std::sort(v.begin(), v.end(), less);
    return v;
  };
  auto a = sorted(l), b = sorted(r);
  // Mean distance between where x sits in `in` (rank fraction, ties counted half) and where it
  // sits in its own sequence.
  auto deviation = [&](const std::vector<std::string>& own, const std::vector<std::string>& in) {
    double sum = 0;
    for (size_t j = 0; j < own.size(); ++j) {
      auto lo = std::lower_bound(in.begin(), in.end(), own[j], less);
      auto hi = std::upper_bound(in.begin(), in.end(), own[j], less);
      double pos = (static_cast<double>(lo - in.begin()) + 0.5 * static_cast<double>(hi - lo)) / static_cast<double>(in.size());
      sum += std::fabs(pos - (static_cast<double>(j) + 0.5) / static_cast<double>(own.size()));
    }
    return sum / static_cast<double>(own.size());
  };
  double dev = (deviation(a, b) + deviation(b, a)) / 2;  // 0 identical, 0.5 disjoint
  return std::max(0.0, 1.0 - 2.0 * dev);
}

// most_common_vals are ordered by frequency: near-duplicate columns (origin vs destination
// province) share the value set but not the ranking. Average overlap of the top-k prefixes.
std::optional<double> mcv_rank_agreement(const ColumnProfile& l, const ColumnProfile& r) {
  size_t k = std::min({l.most_common_vals.size(), r.most_common_vals.size(), size_t{10}});
  if (k < 2) return std::nullopt;
  double sum = 0;
  std::set<std::string> a, b;
  for (size_t d = 0; d < k; ++d) {
    a.insert(l.most_common_vals[d]);
    b.insert(r.most_common_vals[d]);
    size_t inter = 0;
    for (const auto& v : a) inter += b.count(v);
    sum += static_cast<double>(inter) / static_cast<double>(d + 1);
  }
  return sum / static_cast<double>(k);
}

// n_distinct: positive is a count, negative a fraction of the rows. Same sign compares the
// magnitudes; a sign flip (fixed set vs growing with the table) is weak evidence against.
std::optional<double> n_distinct_agreement(const ColumnProfile& l, const ColumnProfile& r) {
  if (!l.n_distinct || !r.n_distinct) return std::nullopt;
  double a = *l.n_distinct, b = *r.n_distinct;
  if ((a < 0) != (b < 0)) return 0.3;
  double ma = std::fabs(a), mb = std::fabs(b);
  if (std::max(ma, mb) == 0) return 1.0;
  return std::min(ma, mb) / std::max(ma, mb);
}

struct Scored {
  std::string to;
  double score;
};

// Picks the rename outcome for one removed column from its candidates (already ≥ threshold).
void resolve(const std::string& from, std::vector<Scored> kept, const DiffOptions& opt, SnapshotDiff& d) {
  if (kept.empty()) return;
  std::stable_sort(kept.begin(), kept.end(), [](const Scored& a, const Scored& b) { return a.score > b.score; });
  bool unique = kept.size() == 1 ||
                (opt.method == RenameMethod::profile && kept[0].score - kept[1].score >= opt.profile_margin);
  if (unique) {
    d.renamed_candidates.push_back(
        {from, kept[0].to, round3(kept[0].score), opt.method == RenameMethod::profile ? "profile" : ""});
    return;
  }
  AmbiguousRename a{from, {}};
  for (const auto& k : kept) a.candidates.push_back({k.to, round3(k.score)});
  d.ambiguous_renames.push_back(std::move(a));
}

// profile method only: one added column is claimed by at most one removed column, the best
// scoring; the others become ambiguous (reported, not guessed), as the uniqueness rule asks.
void enforce_exclusivity(SnapshotDiff& d) {
  std::map<std::string, double> top;
  std::map<std::string, int> at_top;
  for (const auto& rc : d.renamed_candidates) top[rc.to] = std::max(top[rc.to], rc.similarity);
  for (const auto& rc : d.renamed_candidates)
    if (rc.similarity == top[rc.to]) at_top[rc.to]++;
  std::vector<RenameCandidate> kept;
  for (const auto& rc : d.renamed_candidates) {
    // The sole best claimant keeps the rename; a tie at the top leaves none of them.
    if (rc.similarity == top[rc.to] && at_top[rc.to] == 1) kept.push_back(rc);
    else d.ambiguous_renames.push_back({rc.from, {{rc.to, rc.similarity}}});
  }
  d.renamed_candidates = std::move(kept);
}

std::vector<std::string> name_tokens(const std::string& n) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : n) {
    if (std::isalnum(static_cast<unsigned char>(ch)) || static_cast<unsigned char>(ch) >= 0x80) {
      cur += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    } else if (!cur.empty()) {
      out.push_back(std::move(cur));
      cur.clear();
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The only evidence an empty column leaves is its name: a shared word of three or more letters
// (obs_cliente / obs_proveedor) or a small typo-sized edit (comentario / comentarios).
bool names_related(const std::string& a, const std::string& b) {
  std::string la = trim_lower(a), lb = trim_lower(b);
  size_t longer = std::max(la.size(), lb.size());
  if (edit_distance(la, lb) <= std::min<size_t>(2, longer / 3)) return true;
  auto ta = name_tokens(a), tb = name_tokens(b);
  for (const auto& x : ta)
    if (x.size() >= 3 && std::find(tb.begin(), tb.end(), x) != tb.end()) return true;
  return false;
}

size_t meaningful_count(const ColumnProfile& c, const DiffOptions& opt) {
  size_t n = 0;
  for (const auto& v : values_of(c))
    if (std::find(opt.empty_markers.begin(), opt.empty_markers.end(), trim_lower(v)) == opt.empty_markers.end()) ++n;
  return n;
}

// A column's place: the nearest columns before and after it that both snapshots account for
// (kept under their name, or already matched as a rename), named as in the before snapshot.
// A renamed column keeps its place; a dropped-and-added one usually does not.
using Gap = std::pair<std::string, std::string>;

std::map<std::string, Gap> gaps(const StoredSnapshot& s, const std::map<std::string, std::string>& anchor_as_before) {
  std::vector<const ColumnProfile*> cols;
  for (const auto& c : s.columns) cols.push_back(&c);
  std::stable_sort(cols.begin(), cols.end(), [](auto* x, auto* y) { return x->ordinal < y->ordinal; });
  const std::string start = "\x01start", end = "\x01end";
  std::map<std::string, Gap> out;
  std::string prev = start;
  std::vector<std::string> pending;
  for (const auto* c : cols) {
    auto it = anchor_as_before.find(c->name);
    if (it == anchor_as_before.end()) {
      pending.push_back(c->name);
      continue;
    }
    for (const auto& n : pending) out[n] = {prev, it->second};
    pending.clear();
    prev = it->second;
  }
  for (const auto& n : pending) out[n] = {prev, end};
  return out;
}

// profile method, after the profile matching: columns the identifiability gate excludes (two or
// three values, marker-only, empty) cannot be scored, but a rename keeps more than values. Two
// rules, each weaker than a profile match and labelled as such; anything short of a unique,
// same-place answer is left as removed/added (or reported ambiguous), never guessed.
void match_excluded(const StoredSnapshot& before, const StoredSnapshot& after, const DiffOptions& opt, SnapshotDiff& d) {
  std::map<std::string, const ColumnProfile*> b, a;
  for (const auto& c : before.columns) b.emplace(c.name, &c);
  for (const auto& c : after.columns) a.emplace(c.name, &c);
  std::set<std::string> taken_from, taken_to;
  for (const auto& r : d.renamed_candidates) taken_from.insert(r.from), taken_to.insert(r.to);
  for (const auto& r : d.ambiguous_renames) {
    taken_from.insert(r.from);
    for (const auto& c : r.candidates) taken_to.insert(c.to);
  }
  auto place = [&] {
    std::map<std::string, std::string> before_anchor, after_anchor;
    for (const auto& [n, _] : b)
      if (a.count(n)) before_anchor[n] = after_anchor[n] = n;
    for (const auto& r : d.renamed_candidates) before_anchor[r.from] = r.from, after_anchor[r.to] = r.from;
    return std::make_pair(gaps(before, before_anchor), gaps(after, after_anchor));
  };
  auto open_removed = [&] {
    std::vector<const ColumnProfile*> v;
    for (const auto& n : d.removed)
      if (!taken_from.count(n)) v.push_back(b[n]);
    return v;
  };
  auto open_added = [&] {
    std::vector<const ColumnProfile*> v;
    for (const auto& n : d.added)
      if (!taken_to.count(n)) v.push_back(a[n]);
    return v;
  };
  auto nulls_agree = [&](const ColumnProfile& x, const ColumnProfile& y) {
    if (!x.null_frac || !y.null_frac) return !x.null_frac && !y.null_frac;
    return std::fabs(*x.null_frac - *y.null_frac) <= opt.low_card_null_tolerance;
  };

  // Rule 1, value set: the whole (small) value set, the type and the null fraction reappear in
  // exactly one new column, that new column is claimed by no other removed one, and it sits in
  // the removed column's place. Two look-alikes on either side → ambiguous.
  {
    auto [bg, ag] = place();
    auto rem = open_removed(), add = open_added();
    auto same_set = [&](const ColumnProfile& x, const ColumnProfile& y) {
      ValueSet vx = values_of(x);
      return !vx.empty() && !is_identifiable(x, opt) && !is_identifiable(y, opt) && x.pg_type == y.pg_type &&
             vx == values_of(y) && nulls_agree(x, y);
    };
    std::vector<std::pair<std::string, std::string>> accepted;
    for (const auto* r : rem) {
      std::vector<const ColumnProfile*> cands;
      for (const auto* c : add)
        if (same_set(*r, *c)) cands.push_back(c);
      if (cands.empty()) continue;
      int claimants = 0;
      for (const auto* o : rem) claimants += same_set(*o, *cands[0]);
      if (cands.size() > 1 || claimants > 1) {
        AmbiguousRename amb{r->name, {}};
        for (const auto* c : cands) amb.candidates.push_back({c->name, kValueSetScore});
        d.ambiguous_renames.push_back(std::move(amb));
        continue;
      }
      if (bg.at(r->name) == ag.at(cands[0]->name)) accepted.push_back({r->name, cands[0]->name});
    }
    for (const auto& [f, t] : accepted) {
      d.renamed_candidates.push_back({f, t, kValueSetScore, "value_set+position"});
      taken_from.insert(f);
      taken_to.insert(t);
    }
    for (const auto& amb : d.ambiguous_renames) {
      taken_from.insert(amb.from);
      for (const auto& c : amb.candidates) taken_to.insert(c.to);
    }
  }

  // Rule 2, place and name: an empty or marker-only column is the only unaccounted column
  // between the same two neighbours on both sides, with the same type and a related name.
  {
    auto [bg, ag] = place();
    auto rem = open_removed(), add = open_added();
    std::map<Gap, std::vector<const ColumnProfile*>> rem_at, add_at;
    for (const auto* r : rem) rem_at[bg.at(r->name)].push_back(r);
    for (const auto* c : add) add_at[ag.at(c->name)].push_back(c);
    for (const auto& [g, rs] : rem_at) {
      auto it = add_at.find(g);
      if (rs.size() != 1 || it == add_at.end() || it->second.size() != 1) continue;
      const ColumnProfile &r = *rs[0], &c = *it->second[0];
      bool blank = meaningful_count(r, opt) == 0 && meaningful_count(c, opt) == 0;
      if (blank && r.pg_type == c.pg_type && names_related(r.name, c.name))
        d.renamed_candidates.push_back({r.name, c.name, kPositionNameScore, "position+name"});
    }
  }
}

}  // namespace

bool is_after(const StoredSnapshot& s) { return s.reason.rfind("post_", 0) == 0; }

bool same_relation(const StoredSnapshot& a, const StoredSnapshot& b) {
  return a.table_oid && b.table_oid && *a.table_oid == *b.table_oid && !a.database_name.empty() &&
         a.database_name == b.database_name;
}

bool is_identifiable(const ColumnProfile& c, const DiffOptions& opt) {
  if (c.null_frac && *c.null_frac > opt.max_identifiable_null_frac) return false;
  std::set<std::string> meaningful;
  for (const auto& v : values_of(c)) {
    std::string t = trim_lower(v);
    if (std::find(opt.empty_markers.begin(), opt.empty_markers.end(), t) != opt.empty_markers.end()) continue;
    meaningful.insert(v);
  }
  return static_cast<int>(meaningful.size()) >= opt.min_identifiable_values;
}

double profile_similarity(const ColumnProfile& l, const ColumnProfile& r) {
  ValueSet a = values_of(l), b = values_of(r);
  if (a.empty() || b.empty()) return 0.0;
  double t = l.pg_type == r.pg_type ? 1.0 : 0.0;
  return 0.7 * jaccard(a, b) + 0.2 * t + 0.1 * null_agreement(l, r);
}

double profile_similarity_v2(const ColumnProfile& l, const ColumnProfile& r) {
  ValueSet a = values_of(l), b = values_of(r);
  if (a.empty() || b.empty()) return 0.0;
  // Shapes that merely agree (ranges, quantiles) count for less than the very same values: a
  // renamed copy must beat a fresh column drawn from the same distribution.
  double j = jaccard(a, b);
  double shape = std::max(numeric_range_overlap(a, b), quantile_alignment(l.histogram_sample, r.histogram_sample));
  double values = j + (1 - j) * 0.8 * shape;
  // Without MCVs on both sides there is no ranking to compare: it follows the value evidence.
  double rank = mcv_rank_agreement(l, r).value_or(values);
  double t = l.pg_type == r.pg_type ? 1.0 : 0.0;
  double distinct = n_distinct_agreement(l, r).value_or(values);  // no statistics: no opinion
  return 0.55 * values + 0.15 * rank + 0.1 * distinct + 0.1 * t + 0.1 * null_agreement(l, r);
}

SnapshotDiff diff_snapshots(const StoredSnapshot& before, const StoredSnapshot& after, const DiffOptions& opt) {
  SnapshotDiff d;
  auto names = [](const StoredSnapshot& s) {
    std::vector<std::string> n;
    for (const auto& c : s.columns) n.push_back(c.name);
    return n;
  };
  auto hash = [&](const StoredSnapshot& s) {
    return s.schema_hash.empty() ? schema_hash(names(s), opt.hash_excluded) : s.schema_hash;
  };
  d.schema_changed = hash(before) != hash(after);

  std::map<std::string, const ColumnProfile*> b, a;
  for (const auto& c : before.columns) b.emplace(c.name, &c);
  for (const auto& c : after.columns) a.emplace(c.name, &c);
  for (const auto& [n, _] : a)
    if (!b.count(n)) d.added.push_back(n);  // std::map iterates in byte (code point) order
  for (const auto& [n, _] : b)
    if (!a.count(n)) d.removed.push_back(n);
  // One relation: a column is its attnum. A removed name whose attnum reappears under an added
  // name was renamed (ALTER TABLE … RENAME COLUMN); nothing else is a rename, whatever the values.
  std::map<std::string, std::string> renamed_to;  // after name -> before name
  const bool by_attnum = same_relation(before, after);
  if (by_attnum) {
    std::map<int, std::string> added_at;
    for (const auto& n : d.added) added_at[a[n]->ordinal] = n;
    for (const auto& n : d.removed) {
      auto it = added_at.find(b[n]->ordinal);
      if (it == added_at.end()) continue;
      d.renamed_candidates.push_back({n, it->second, 1.0, "attnum"});
      renamed_to[it->second] = n;
    }
  }
  for (const auto& c : after.columns) {
    auto it = b.find(c.name);
    if (auto r = renamed_to.find(c.name); r != renamed_to.end()) it = b.find(r->second);
    if (it != b.end() && it->second->pg_type != c.pg_type) d.type_changed.push_back({c.name, it->second->pg_type, c.pg_type});
  }

  if (!by_attnum && !d.added.empty() && !d.removed.empty()) {
    std::vector<const ColumnProfile*> pool;
    for (const auto& n : d.added)
      if (is_identifiable(*a[n], opt)) pool.push_back(a[n]);
    for (const auto& n : d.removed) {
      const ColumnProfile& from = *b[n];
      if (!is_identifiable(from, opt)) continue;
      std::vector<Scored> kept;
      for (const auto* to : pool) {
        double s = opt.method == RenameMethod::profile ? profile_similarity_v2(from, *to) : profile_similarity(from, *to);
        if (s >= opt.rename_threshold) kept.push_back({to->name, s});
      }
      resolve(n, std::move(kept), opt, d);
    }
    if (opt.method == RenameMethod::profile) {
      enforce_exclusivity(d);
      match_excluded(before, after, opt, d);
    }
  }

  const Provenance &p = before.provenance, &q = after.provenance;
  auto differs = [](const auto& x, const auto& y) { return x && y && *x != *y; };
  if (differs(p.parser_version, q.parser_version)) d.provenance_changed.push_back("parser_version");
  if (differs(p.normalization_version, q.normalization_version)) d.provenance_changed.push_back("normalization_version");
  if (differs(p.layout_profile, q.layout_profile)) d.provenance_changed.push_back("layout_profile");
  if (differs(p.header_quality, q.header_quality)) d.provenance_changed.push_back("header_quality");
  if (differs(p.is_truncated, q.is_truncated)) d.provenance_changed.push_back("is_truncated");
  return d;
}

nlohmann::json to_json(const SnapshotDiff& d) {
  nlohmann::json j;
  j["schema_changed"] = d.schema_changed;
  j["added"] = d.added;
  j["removed"] = d.removed;
  j["type_changed"] = nlohmann::json::array();
  for (const auto& t : d.type_changed) j["type_changed"].push_back({{"column", t.column}, {"from", t.from}, {"to", t.to}});
  j["renamed_candidates"] = nlohmann::json::array();
  for (const auto& r : d.renamed_candidates)
  {
    nlohmann::json rc = {{"from", r.from}, {"to", r.to}, {"similarity", r.similarity}};
    if (!r.evidence.empty()) rc["evidence"] = r.evidence;
    j["renamed_candidates"].push_back(std::move(rc));
  }
  j["ambiguous_renames"] = nlohmann::json::array();
  for (const auto& a : d.ambiguous_renames) {
    nlohmann::json c = nlohmann::json::array();
    for (const auto& k : a.candidates) c.push_back({{"to", k.to}, {"similarity", k.similarity}});
    j["ambiguous_renames"].push_back({{"from", a.from}, {"candidates", c}});
  }
  j["provenance_changed"] = d.provenance_changed;
  return j;
}

const char* to_string(RenameMethod m) { return m == RenameMethod::profile ? "profile" : "reference"; }

std::optional<RenameMethod> rename_method_from_string(const std::string& s) {
  if (s == "reference") return RenameMethod::reference;
  if (s == "profile" || s == "profile+") return RenameMethod::profile;
  return std::nullopt;
}

}  // namespace predrop::evidence
