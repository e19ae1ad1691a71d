// The drift cascade: every Cascade, Verdicts/classes, Summarize and Seeded-faults scenario of
// the reference application's acceptance cases, with its default provenance (phase4-v1, simple_tabular).
#include <gtest/gtest.h>

#include <functional>

#include "evidence/drift.hpp"
#include "evidence_fixtures.hpp"

using namespace predrop::capture;
using namespace predrop::evidence;
using namespace predrop::evidence_test;

namespace {
const DriftContext kMatching{true, true};

std::vector<ColumnProfile> base() {
  return {col("provincia", "text", provinces()), col("anio", "bigint", years())};
}
}  // namespace

TEST(EvidenceCascade, G1ParserChangeExonerates) {
  auto before = snap({col("col_1", "text", {})}, "phase3-v2");
  auto after = snap({col("provincia", "text", {})}, "phase4-v1");
  auto v = classify_change(before, after, kMatching);
  EXPECT_EQ(v.verdict, "exonerated");
  EXPECT_EQ(v.exonerated_by, "G1_provenance");
  EXPECT_FALSE(v.is_actionable);
  // Same parser, unrelated rename: unexplained.
  auto u = classify_change(snap({col("col_1", "text", {})}), snap({col("provincia", "text", {})}), kMatching);
  EXPECT_EQ(u.verdict, "unexplained");
  EXPECT_TRUE(u.is_actionable);
}

TEST(EvidenceCascade, AttributabilityPlaceholders) {
  auto add = [](std::string p1, std::string p2) {
    return classify_change(snap({col("a", "text", {})}, p1), snap({col("a", "text", {}), col("b", "text", {})}, p2), kMatching);
  };
  auto v = add("", "phase4-v1");
  EXPECT_EQ(v.verdict, "unattributable");
  EXPECT_FALSE(v.is_actionable);
  EXPECT_EQ(v.gates_not_evaluated, std::vector<std::string>{"G1_provenance"});
  EXPECT_EQ(add("legacy:unknown", "legacy:unknown").verdict, "unattributable");
  EXPECT_EQ(add("2026-05-04", "2026-05-04").verdict, "unattributable");
  auto real = add("p:ac538ee9d1a7", "p:ac538ee9d1a7");
  EXPECT_EQ(real.verdict, "unexplained");
  EXPECT_TRUE(real.is_actionable);
  // A placeholder-vs-real difference is a provenance change: G1 runs first and exonerates.
  EXPECT_EQ(add("legacy:unknown", "p:ac538ee9d1a7").exonerated_by, "G1_provenance");
}

TEST(EvidenceCascade, RealProvenance) {
  EXPECT_FALSE(is_real_provenance(std::nullopt));
  EXPECT_FALSE(is_real_provenance(std::string()));
  EXPECT_FALSE(is_real_provenance(std::string("unavailable")));
  EXPECT_FALSE(is_real_provenance(std::string("legacy:unknown")));
  EXPECT_FALSE(is_real_provenance(std::string("2026-05-04")));
  EXPECT_TRUE(is_real_provenance(std::string("phase4-v1")));
  EXPECT_TRUE(is_real_provenance(std::string("p:ac538ee9d1a7")));
  EXPECT_TRUE(is_real_provenance(std::string("2026-05-04-1")));
}

TEST(EvidenceCascade, G3Pipeline) {
  auto before = snap({col("a", "text", {})});
  auto after = snap({col("a", "text", {}), col("b", "text", {})});
  after.provenance.layout_profile = "wide_csv";
  EXPECT_EQ(classify_change(before, after, kMatching).exonerated_by, "G3_pipeline");
  after = snap({col("a", "text", {}), col("b", "text", {})});
  after.provenance.is_truncated = true;
  EXPECT_EQ(classify_change(before, after, kMatching).exonerated_by, "G3_pipeline");
}

TEST(EvidenceCascade, G0AndG2) {
  auto s = snap(base());
  auto g0 = classify_change(s, s, {false, std::nullopt});
  EXPECT_EQ(g0.exonerated_by, "G0_identity");
  EXPECT_TRUE(g0.gates_not_evaluated.empty());
  auto g2 = classify_change(s, s, {true, false});
  EXPECT_EQ(g2.exonerated_by, "G2_sibling");
  auto g2n = classify_change(s, s, {std::nullopt, false});
  EXPECT_EQ(g2n.gates_not_evaluated, std::vector<std::string>{"G0_identity"});
  auto none = classify_change(s, s, {});
  EXPECT_EQ(none.verdict, "no_change");
  EXPECT_EQ(none.gates_not_evaluated, (std::vector<std::string>{"G0_identity", "G2_sibling"}));
}

TEST(EvidenceCascade, VerdictsAndClasses) {
  auto s = snap(base());
  EXPECT_EQ(classify_change(s, s, kMatching).verdict, "no_change");
  auto cls = [](std::vector<ColumnProfile> a, std::vector<ColumnProfile> b) {
    auto v = classify_change(snap(std::move(a)), snap(std::move(b)), kMatching);
    EXPECT_EQ(v.verdict, "unexplained");
    return v.change_class;
  };
  EXPECT_EQ(cls({col("a", "text", {})}, {col("a", "text", {}), col("b", "text", {})}), "additive");
  EXPECT_EQ(cls({col("a", "text", {}), col("b", "text", {})}, {col("a", "text", {})}), "removal");
  EXPECT_EQ(cls({col("monto", "text", {})}, {col("monto", "numeric", {})}), "type_change");
  EXPECT_EQ(cls({col("provincia", "text", provinces())}, {col("jurisdiccion", "text", provinces())}), "rename");
  EXPECT_EQ(cls({col("provincia", "text", provinces())}, {col("importe", "numeric", {"1", "2", "3", "4"})}), "reshape");
  // Ambiguous renames are a reshape.
  EXPECT_EQ(cls({col("provincia", "text", provinces())},
                {col("provincia_origen", "text", provinces()), col("provincia_destino", "text", provinces())}),
            "reshape");
}

TEST(EvidenceCascade, EveryVerdictCarriesReasonAndDiff) {
  auto v = classify_change(snap({col("a", "text", {})}), snap({col("b", "text", {})}), kMatching);
  EXPECT_FALSE(v.reason.empty());
  EXPECT_EQ(v.diff.added, std::vector<std::string>{"b"});
  auto j = to_json(v);
  EXPECT_EQ(j["verdict"], "unexplained");
  EXPECT_EQ(j["diff"]["removed"][0], "a");
}

TEST(EvidenceSummarize, PerGateAndClass) {
  std::vector<DriftVerdict> vs;
  vs.push_back(classify_change(snap({col("a", "text", {})}, "p:1"), snap({col("b", "text", {})}, "p:2"), kMatching));
  vs.push_back(classify_change(snap(base()), snap(base()), kMatching));
  vs.push_back(classify_change(snap({col("a", "text", {})}), snap({col("a", "text", {}), col("b", "text", {})}), kMatching));
  auto s = summarize(vs);
  EXPECT_EQ(s.evaluated, 3);
  EXPECT_EQ(s.actionable, 1);
  EXPECT_EQ(s.exonerated_by_gate, (std::map<std::string, int>{{"G1_provenance", 1}}));
  EXPECT_EQ(s.actionable_by_class, (std::map<std::string, int>{{"additive", 1}}));
  EXPECT_EQ(s.by_verdict.at("no_change"), 1);
}

// §9 seeded faults: provincia/anio/monto/poblacion with empty profiles, provenance
// p:phase4-v1 / n:v3 / simple_tabular / good / false; the cascade must score 1.0/1.0.
namespace {
struct Fault {
  std::string name;
  StoredSnapshot before, after;
  DriftContext ctx;
  bool should_flag;
};

StoredSnapshot seeded(std::vector<ColumnProfile> cols, std::string parser = "p:phase4-v1") { return snap(std::move(cols), parser); }

std::vector<ColumnProfile> seeded_base() {
  return {col("provincia", "text", {}), col("anio", "bigint", {}), col("monto", "numeric", {}), col("poblacion", "bigint", {})};
}
std::vector<ColumnProfile> without_monto() {
  auto c = seeded_base();
  c.erase(c.begin() + 2);
  return c;
}

std::vector<Fault> faults() {
  std::vector<Fault> f;
  auto b = seeded(seeded_base());
  f.push_back({"monto removed", b, seeded(without_monto()), kMatching, true});
  auto retyped = seeded_base();
  retyped[2].pg_type = "text";
  f.push_back({"monto retyped", b, seeded(retyped), kMatching, true});
  auto renamed = seeded_base();
  renamed[2].name = "importe";
  f.push_back({"monto renamed (no values: reshape)", b, seeded(renamed), kMatching, true});
  f.push_back({"replaced by col_1, col_2", b, seeded({col("col_1", "text", {}), col("col_2", "text", {})}), kMatching, true});
  auto added = seeded_base();
  added.push_back(col("tasa", "numeric", {}));
  f.push_back({"tasa added", b, seeded(added), kMatching, true});
  f.push_back({"no change", b, b, kMatching, false});
  f.push_back({"parser change with monto removed", b, seeded(without_monto(), "p:phase5-v2"), kMatching, false});
  f.push_back({"different source url", b, seeded(without_monto()), {true, false}, false});
  f.push_back({"different identity", b, seeded(without_monto()), {false, true}, false});
  return f;
}

struct Score {
  double precision, recall;
};
Score measure(const std::vector<Fault>& suite, const std::function<bool(const Fault&)>& flags) {
  int tp = 0, fp = 0, fn = 0;
  for (const auto& f : suite) {
    bool flagged = false;
    try {
      flagged = flags(f);
    } catch (...) {
      flagged = false;  // a classifier that raises counts as a miss
    }
    if (flagged && f.should_flag) ++tp;
    if (flagged && !f.should_flag) ++fp;
    if (!flagged && f.should_flag) ++fn;
  }
  return {tp + fp == 0 ? 1.0 : double(tp) / (tp + fp), tp + fn == 0 ? 1.0 : double(tp) / (tp + fn)};
}
}  // namespace

TEST(EvidenceSeededFaults, CascadeScoresPerfectly) {
  auto suite = faults();
  for (const auto& f : suite) {
    auto v = classify_change(f.before, f.after, f.ctx);
    EXPECT_EQ(v.is_actionable, f.should_flag) << f.name << ": " << v.verdict << " " << v.reason;
  }
  auto renamed = classify_change(suite[2].before, suite[2].after, kMatching);
  EXPECT_EQ(renamed.change_class, "reshape");
  auto s = measure(suite, [](const Fault& f) { return classify_change(f.before, f.after, f.ctx).is_actionable; });
  EXPECT_EQ(s.recall, 1.0);
  EXPECT_EQ(s.precision, 1.0);
}

TEST(EvidenceSeededFaults, SanityClassifiers) {
  auto suite = faults();
  EXPECT_EQ(measure(suite, [](const Fault&) { return false; }).recall, 0.0);
  auto all = measure(suite, [](const Fault&) { return true; });
  EXPECT_EQ(all.recall, 1.0);
  EXPECT_LT(all.precision, 1.0);
  EXPECT_EQ(measure(suite, [](const Fault&) -> bool { throw std::runtime_error("boom"); }).recall, 0.0);
  auto empty = measure({}, [](const Fault&) { return true; });
  EXPECT_EQ(empty.precision, 1.0);
  EXPECT_EQ(empty.recall, 1.0);
}

// Before/after pairs: a before's newest after (its post_analyze once there is one), waiting for
// statistics before that, and the consecutive chain around pairs, which compares the next
// snapshot with the pair's after and never counts the pair's change twice.
TEST(EvidencePairs, CompletePairsAndTheChainAroundThem) {
  auto at = [](std::string id, std::string reason, int minute, std::vector<ColumnProfile> cols, std::string pair_of = "",
               std::string profile_of = "") {
    auto s = snap(std::move(cols));
    s.id = std::move(id);
    s.reason = std::move(reason);
    s.captured_at = "2026-11-30T09:0" + std::to_string(minute) + ":00.000000Z";
    s.stats_available = reason == "post_analyze" || reason == "pre_drop" || reason == "baseline";
    if (!pair_of.empty()) s.pair_of = pair_of;
    if (!profile_of.empty()) s.profile_of = profile_of;
    return s;
  };
  auto grown = base();
  grown.push_back(col("tasa", "numeric", {}));
  std::vector<StoredSnapshot> w = {at("b0", "baseline", 0, base()), at("p1", "pre_drop", 1, base()),
                                   at("c1", "post_create", 2, grown, "p1"), at("z1", "post_analyze", 3, grown, "p1", "c1"),
                                   at("p2", "pre_drop", 4, grown), at("c2", "post_create", 5, base(), "p2"),
                                   at("n", "post_create", 6, base())};
  w.back().table_name = "other";  // a new table: unpaired
  auto pairing = find_pairs(w);
  ASSERT_EQ(pairing.pairs.size(), 2u);
  EXPECT_EQ(pairing.pairs[0].before->id, "p1");
  EXPECT_EQ(pairing.pairs[0].after->id, "z1");
  EXPECT_FALSE(pairing.pairs[0].waiting_for_stats);
  EXPECT_EQ(pairing.pairs[1].after->id, "c2");
  EXPECT_TRUE(pairing.pairs[1].waiting_for_stats);
  EXPECT_EQ(pairing.superseded, std::set<std::string>{"c1"});
  ASSERT_EQ(pairing.unpaired.size(), 2u);
  EXPECT_EQ(pairing.unpaired[0]->id, "b0");
  EXPECT_EQ(pairing.unpaired[1]->id, "n");

  auto pairs = pair_and_classify(w, {});
  std::vector<std::string> seen;
  for (const auto& p : pairs) seen.push_back(p.kind + ":" + p.before->id + ">" + p.after->id);
  EXPECT_EQ(seen, (std::vector<std::string>{"before_after:p1>z1", "before_after:p2>c2", "same_table:b0>p1", "same_table:z1>p2"}));
  auto r = drift_report_json(w, pairs, 30);
  EXPECT_EQ(r["complete_pairs"], 2);
  EXPECT_EQ(r["pairs_waiting_for_stats"], 1);
  EXPECT_EQ(r["unpaired_snapshots"], 2);
  EXPECT_EQ(r["changes"].size(), 2u);  // the two pairs; the chain links changed nothing
}
