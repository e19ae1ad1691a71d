// diff_snapshots, the identifiability gate and both similarity scores: every Diff, Similarity,
// G5 and G6 acceptance scenario of the reference application, plus the profile method's departures.
#include <gtest/gtest.h>

#include <map>

#include "evidence/diff.hpp"
#include "evidence_fixtures.hpp"

using namespace predrop::capture;
using namespace predrop::evidence;
using namespace predrop::evidence_test;

TEST(EvidenceHash, OrderAndMetadataDoNotMatterRenameDoes) {
  const std::vector<std::string> ex = {"_source_dataset_id", "_ingested_at", "_source_url"};
  EXPECT_EQ(schema_hash({"a", "b", "c"}, ex), schema_hash({"c", "a", "b"}, ex));               // §9.1
  EXPECT_EQ(schema_hash({"a", "b"}, ex), schema_hash({"a", "b", "_source_dataset_id"}, ex));  // §9.2
  EXPECT_NE(schema_hash({"a", "b"}, ex), schema_hash({"a", "b_renamed"}, ex));                // §9.3
}

TEST(EvidenceDiff, IdenticalShapes) {  // §9.11
  auto s = snap({col("a", "text", {}), col("b", "text", {})});
  auto d = diff_snapshots(s, s);
  EXPECT_FALSE(d.schema_changed);
  EXPECT_TRUE(d.added.empty());
  EXPECT_TRUE(d.removed.empty());
}

TEST(EvidenceDiff, AddedAndRemoved) {  // §9.12
  auto d = diff_snapshots(snap({col("a", "text", {}), col("b", "text", {})}), snap({col("a", "text", {}), col("c", "text", {})}));
  EXPECT_TRUE(d.schema_changed);
  EXPECT_EQ(d.added, std::vector<std::string>{"c"});
  EXPECT_EQ(d.removed, std::vector<std::string>{"b"});
}

TEST(EvidenceDiff, TypeChange) {  // §9.13
  auto d = diff_snapshots(snap({col("monto", "text", {})}), snap({col("monto", "numeric", {})}));
  ASSERT_EQ(d.type_changed.size(), 1u);
  EXPECT_EQ(d.type_changed[0].column, "monto");
  EXPECT_EQ(d.type_changed[0].from, "text");
  EXPECT_EQ(d.type_changed[0].to, "numeric");
  EXPECT_FALSE(d.schema_changed);
}

TEST(EvidenceDiff, TypmodChangeCounts) {
  auto d = diff_snapshots(snap({col("m", "numeric(10,2)", {})}), snap({col("m", "numeric", {})}));
  EXPECT_EQ(d.type_changed.size(), 1u);
}

TEST(EvidenceDiff, RenameWithSameValues) {  // §9.14
  auto d = diff_snapshots(snap({col("provincia", "text", provinces()), col("anio", "bigint", years())}),
                          snap({col("jurisdiccion", "text", provinces()), col("anio", "bigint", years())}));
  ASSERT_EQ(d.renamed_candidates.size(), 1u);
  EXPECT_EQ(d.renamed_candidates[0].from, "provincia");
  EXPECT_EQ(d.renamed_candidates[0].to, "jurisdiccion");
  EXPECT_NEAR(d.renamed_candidates[0].similarity, 1.0, 1e-9);
  // Renamed columns still appear in added and removed.
  EXPECT_EQ(d.added, std::vector<std::string>{"jurisdiccion"});
  EXPECT_EQ(d.removed, std::vector<std::string>{"provincia"});
}

TEST(EvidenceDiff, DisjointValuesNoRename) {  // §9.15
  auto d = diff_snapshots(snap({col("provincia", "text", {"Salta", "Jujuy"})}), snap({col("importe", "numeric", {"10.5", "20.1"})}));
  EXPECT_TRUE(d.renamed_candidates.empty());
  EXPECT_TRUE(d.ambiguous_renames.empty());
}

TEST(EvidenceSimilarity, NoValuesScoresZero) {  // §9.16
  EXPECT_EQ(profile_similarity(col("a", "text", {}), col("b", "text", {})), 0.0);
  EXPECT_EQ(profile_similarity(col("a", "text", provinces()), col("b", "text", {})), 0.0);
  EXPECT_EQ(profile_similarity_v2(col("a", "text", {}), col("b", "text", provinces())), 0.0);
}

TEST(EvidenceSimilarity, SharedValuesBeatSameTypeDisjoint) {  // §9.17
  double shared_other_type = profile_similarity(col("a", "text", provinces()), col("b", "varchar", provinces()));
  double same_type_disjoint = profile_similarity(col("a", "text", {"x"}), col("b", "text", {"y"}));
  EXPECT_GT(shared_other_type, same_type_disjoint);
}

TEST(EvidenceSimilarity, WorkedValues) {
  EXPECT_NEAR(profile_similarity(col("a", "text", provinces(), 0.0), col("b", "text", provinces(), 0.0)), 1.0, 1e-12);
  EXPECT_NEAR(profile_similarity(col("a", "text", provinces(), 0.0), col("b", "varchar", provinces(), 0.0)), 0.8, 1e-12);
  // A null null_frac on either side counts 0.5 of the null term.
  EXPECT_NEAR(profile_similarity(col("a", "text", provinces(), std::nullopt), col("b", "text", provinces(), 0.0)), 0.95, 1e-12);
  EXPECT_NEAR(profile_similarity_v2(col("a", "text", provinces(), 0.0), col("b", "text", provinces(), 0.0)), 1.0, 1e-12);
}

TEST(EvidenceGate, G5RejectsAndAccepts) {
  EXPECT_FALSE(is_identifiable(col("sexo", "text", {"M", "F"})));
  EXPECT_FALSE(is_identifiable(col("x", "text", {"", "-", "s/d", "N/A", "null"})));
  EXPECT_FALSE(is_identifiable(col("x", "text", provinces(), 0.99)));
  EXPECT_TRUE(is_identifiable(col("provincia", "text", provinces())));
  // Markers are trimmed and case-folded; histogram values count with the MCVs.
  EXPECT_FALSE(is_identifiable(col("x", "text", {" NA ", "None", ".", "SD", "a", "b", "c"})));
  ColumnProfile h = col("h", "int", {"1", "2"});
  h.histogram_sample = {"3", "4"};
  EXPECT_TRUE(is_identifiable(h));
}

TEST(EvidenceGate, BoundsAreConfigurable) {
  DiffOptions opt;
  opt.min_identifiable_values = 2;
  EXPECT_TRUE(is_identifiable(col("sexo", "text", {"M", "F"}), opt));
  opt.max_identifiable_null_frac = 0.995;
  EXPECT_TRUE(is_identifiable(col("x", "text", provinces(), 0.99), opt));
}

TEST(EvidenceGate, LowCardinalityRenameIsNotReported) {  // activo -> habilitado [S,N]
  auto d = diff_snapshots(snap({col("activo", "text", {"S", "N"})}), snap({col("habilitado", "text", {"S", "N"})}));
  EXPECT_TRUE(d.renamed_candidates.empty());
  EXPECT_EQ(d.removed, std::vector<std::string>{"activo"});
}

TEST(EvidenceGate, SexoNeverRenamesByScore) {
  // The gate keeps [M,F] out of scoring in both methods; only the profile method's value-set
  // rule (EvidenceExcluded below) may match it, and says so.
  for (auto m : {RenameMethod::reference, RenameMethod::profile}) {
    DiffOptions opt;
    opt.method = m;
    auto d = diff_snapshots(snap({col("sexo", "text", {"M", "F"})}), snap({col("genero", "text", {"M", "F"})}), opt);
    for (const auto& r : d.renamed_candidates) EXPECT_EQ(r.evidence, "value_set+position");
    if (m == RenameMethod::reference) {
      EXPECT_TRUE(d.renamed_candidates.empty());
    }
  }
}

TEST(EvidenceUniqueness, NearDuplicatesAreAmbiguous) {  // G6
  auto d = diff_snapshots(snap({col("provincia", "text", provinces())}),
                          snap({col("provincia_origen", "text", provinces()), col("provincia_destino", "text", provinces())}));
  EXPECT_TRUE(d.renamed_candidates.empty());
  ASSERT_EQ(d.ambiguous_renames.size(), 1u);
  EXPECT_EQ(d.ambiguous_renames[0].from, "provincia");
  ASSERT_EQ(d.ambiguous_renames[0].candidates.size(), 2u);
  std::set<std::string> to = {d.ambiguous_renames[0].candidates[0].to, d.ambiguous_renames[0].candidates[1].to};
  EXPECT_EQ(to, (std::set<std::string>{"provincia_origen", "provincia_destino"}));
}

TEST(EvidenceUniqueness, OneGoodCandidateAmongOthers) {  // G6
  auto d = diff_snapshots(snap({col("provincia", "text", provinces())}),
                          snap({col("jurisdiccion", "text", provinces()), col("importe", "numeric", {"1.5", "2.5", "3.5", "4.5"})}));
  ASSERT_EQ(d.renamed_candidates.size(), 1u);
  EXPECT_EQ(d.renamed_candidates[0].to, "jurisdiccion");
  EXPECT_TRUE(d.ambiguous_renames.empty());
}

TEST(EvidenceUniqueness, ThresholdIsConfigurable) {
  // Half the values shared: J = 1/3 -> 0.7/3 + 0.2 + 0.1 = 0.533, under 0.6, over 0.5.
  auto before = snap({col("a", "text", {"1", "2", "3", "4", "5", "6"})});
  auto after = snap({col("b", "text", {"4", "5", "6", "7", "8", "9"})});
  EXPECT_TRUE(diff_snapshots(before, after).renamed_candidates.empty());
  DiffOptions opt;
  opt.rename_threshold = 0.5;
  EXPECT_EQ(diff_snapshots(before, after, opt).renamed_candidates.size(), 1u);
}

TEST(EvidenceUniqueness, ReferenceHasNoExclusivity) {
  // Two removed columns with the same values both claim the one added column.
  auto d = diff_snapshots(snap({col("p1", "text", provinces()), col("p2", "text", provinces())}),
                          snap({col("p", "text", provinces())}));
  EXPECT_EQ(d.renamed_candidates.size(), 2u);
  DiffOptions opt;
  opt.method = RenameMethod::profile;
  auto e = diff_snapshots(snap({col("p1", "text", provinces()), col("p2", "text", provinces())}),
                          snap({col("p", "text", provinces())}), opt);
  EXPECT_TRUE(e.renamed_candidates.empty());  // a tie: reported, not guessed
  EXPECT_EQ(e.ambiguous_renames.size(), 2u);
}

TEST(EvidenceProfile, RankingSeparatesNearDuplicates) {
  // Origin and destination share the province set but not the ranking of the most common.
  auto origen = col("provincia_origen", "text", provinces());
  auto destino = col("provincia_destino", "text", reversed(provinces()));
  DiffOptions opt;
  opt.method = RenameMethod::profile;
  auto before = snap({origen, destino});
  auto o2 = origen, d2 = destino;
  o2.name = "origen";
  d2.name = "destino";
  auto d = diff_snapshots(before, snap({o2, d2}), opt);
  ASSERT_EQ(d.renamed_candidates.size(), 2u) << to_json(d).dump();
  for (const auto& r : d.renamed_candidates)
    EXPECT_EQ(r.to, r.from == "provincia_origen" ? "origen" : "destino");
  // The reference cannot tell them apart.
  EXPECT_EQ(diff_snapshots(before, snap({o2, d2})).renamed_candidates.size(), 0u);
}

TEST(EvidenceProfile, NumericDriftStillMatches) {
  ColumnProfile a = col("monto", "numeric", {});
  a.histogram_sample = {"10", "20", "30", "40", "50", "60"};
  ColumnProfile b = col("importe", "numeric", {});
  b.histogram_sample = {"11", "19", "31", "42", "49", "61"};
  EXPECT_LT(profile_similarity(a, b), 0.6);
  EXPECT_GE(profile_similarity_v2(a, b), 0.6);
}

namespace {
// Equi-depth quantiles as histogram_sample holds them: the lowest bounds of codes or dates.
ColumnProfile quantiles(std::string name, std::string type, std::vector<std::string> bounds) {
  ColumnProfile c = col(std::move(name), std::move(type), {});
  c.n_distinct = -0.8;
  c.histogram_sample = std::move(bounds);
  return c;
}
std::vector<std::string> codes(int from, int step, int n, const char* prefix = "C") {
  std::vector<std::string> v;
  for (int i = 0; i < n; ++i) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%s%05d", prefix, from + i * step);
    v.push_back(buf);
  }
  return v;
}
}  // namespace

TEST(EvidenceProfile, DriftedTextQuantilesStillMatch) {
  // Drift moves every bound a little: no value in common, the same place in the distribution.
  auto before = quantiles("codigo", "text", codes(3, 100, 20));
  auto after = quantiles("cod_item", "text", codes(41, 101, 20));
  EXPECT_LT(profile_similarity(before, after), 0.6);
  EXPECT_GE(profile_similarity_v2(before, after), 0.8);
  DiffOptions opt;
  opt.method = RenameMethod::profile;
  auto d = diff_snapshots(snap({before}), snap({after}), opt);
  ASSERT_EQ(d.renamed_candidates.size(), 1u) << to_json(d).dump();
  EXPECT_EQ(d.renamed_candidates[0].to, "cod_item");
}

TEST(EvidenceProfile, DisjointOrShiftedQuantilesDoNotMatch) {
  auto codigo = quantiles("codigo", "text", codes(0, 100, 20));
  // Same type, same shape, another range: dates a year later, codes with another prefix.
  EXPECT_LT(profile_similarity_v2(codigo, quantiles("otro", "text", codes(0, 100, 20, "X"))), 0.6);
  auto fecha = quantiles("fecha", "date", {"2020-01-03", "2020-01-20", "2020-02-07", "2020-02-25", "2020-03-14", "2020-04-01"});
  auto baja = quantiles("fecha_baja", "date", {"2021-01-02", "2021-01-19", "2021-02-06", "2021-02-24", "2021-03-15", "2021-04-02"});
  EXPECT_LT(profile_similarity_v2(fecha, baja), 0.6);
  DiffOptions opt;
  opt.method = RenameMethod::profile;
  EXPECT_TRUE(diff_snapshots(snap({fecha}), snap({baja}), opt).renamed_candidates.empty());
}

TEST(EvidenceProfile, NumbersCompareAsNumbers) {
  // Byte-wise "100" < "20"; as numbers these sequences are the same distribution.
  auto a = quantiles("monto", "numeric", {"5", "20", "100", "250", "900", "1500"});
  auto b = quantiles("importe", "numeric", {"6", "21", "101", "251", "901", "1501"});
  EXPECT_GE(profile_similarity_v2(a, b), 0.8);
}

TEST(EvidenceProfile, ExactCopyBeatsLookalike) {
  // A renamed copy keeps the very values; a fresh column from the same distribution only the
  // shape. The copy must win by the margin; two exact copies stay ambiguous.
  auto monto = quantiles("monto", "numeric", codes(0, 100, 20, ""));
  auto copy = monto;
  copy.name = "importe";
  auto lookalike = quantiles("otro_monto", "numeric", codes(7, 100, 20, ""));
  DiffOptions opt;
  opt.method = RenameMethod::profile;
  auto d = diff_snapshots(snap({monto}), snap({copy, lookalike}), opt);
  ASSERT_EQ(d.renamed_candidates.size(), 1u) << to_json(d).dump();
  EXPECT_EQ(d.renamed_candidates[0].to, "importe");
  auto twin = copy;
  twin.name = "importe2";
  auto e = diff_snapshots(snap({monto}), snap({copy, twin}), opt);
  EXPECT_TRUE(e.renamed_candidates.empty());
  EXPECT_EQ(e.ambiguous_renames.size(), 1u);
}

TEST(EvidenceProfile, MethodNames) {
  EXPECT_EQ(rename_method_from_string("reference"), RenameMethod::reference);
  EXPECT_EQ(rename_method_from_string("profile"), RenameMethod::profile);
  EXPECT_EQ(rename_method_from_string("profile+"), RenameMethod::profile);
  EXPECT_FALSE(rename_method_from_string("guess").has_value());
}

TEST(EvidenceProvenance, OnlyBothNonNullAndDifferent) {
  auto a = snap({col("a", "text", {})});
  auto b = a;
  a.provenance = {"p:1", std::nullopt, "simple_tabular", "good", false};
  b.provenance = {"p:2", "n:2", "wide_csv", std::nullopt, true};
  auto d = diff_snapshots(a, b);
  EXPECT_EQ(d.provenance_changed, (std::vector<std::string>{"parser_version", "layout_profile", "is_truncated"}));
}

TEST(EvidenceDiff, MetadataColumnOnlyIsNotASchemaChange) {
  auto a = snap({col("a", "text", {})});
  auto b = snap({col("a", "text", {}), col("_ingested_at", "timestamptz", {})});
  auto d = diff_snapshots(a, b);
  EXPECT_FALSE(d.schema_changed);
  EXPECT_EQ(d.added, std::vector<std::string>{"_ingested_at"});
}

TEST(EvidenceDiff, JsonShape) {
  auto d = diff_snapshots(snap({col("provincia", "text", provinces())}), snap({col("jurisdiccion", "text", provinces())}));
  auto j = to_json(d);
  EXPECT_EQ(j["renamed_candidates"][0]["from"], "provincia");
  EXPECT_EQ(j["renamed_candidates"][0]["similarity"], 1.0);
  EXPECT_TRUE(j["ambiguous_renames"].is_array());
  EXPECT_TRUE(j["type_changed"].is_array());
}

// Columns the identifiability gate excludes, profile method only: value set + place, or (empty
// and marker-only columns) place + type + related name. Each rule with the cases it must refuse.
namespace {

DiffOptions profile_method() {
  DiffOptions opt;
  opt.method = RenameMethod::profile;
  return opt;
}

ColumnProfile id_col() { return col("id", "integer", {"1", "2", "3", "4", "5"}); }
ColumnProfile empty_col(std::string name, std::string type = "text") { return col(std::move(name), std::move(type), {}, 1.0); }

}  // namespace

TEST(EvidenceExcluded, TwoValueColumnInPlaceWithSameValueSetIsRenamed) {
  auto before = snap({id_col(), col("sexo", "text", {"M", "F"}), col("anio", "integer", years())});
  auto after = snap({id_col(), col("genero", "text", {"M", "F"}), col("anio", "integer", years())});
  auto d = diff_snapshots(before, after, profile_method());
  ASSERT_EQ(d.renamed_candidates.size(), 1u);
  EXPECT_EQ(d.renamed_candidates[0].from, "sexo");
  EXPECT_EQ(d.renamed_candidates[0].to, "genero");
  EXPECT_EQ(d.renamed_candidates[0].evidence, "value_set+position");
  EXPECT_DOUBLE_EQ(d.renamed_candidates[0].similarity, kValueSetScore);
  EXPECT_TRUE(d.ambiguous_renames.empty());
  auto j = to_json(d);
  EXPECT_EQ(j["renamed_candidates"][0]["evidence"], "value_set+position");
  // The reference never matches a column its gate excludes, and labels nothing.
  auto r = diff_snapshots(before, after);
  EXPECT_TRUE(r.renamed_candidates.empty());
  EXPECT_FALSE(to_json(diff_snapshots(snap({col("provincia", "text", provinces())}), snap({col("jurisdiccion", "text", provinces())})))
                   ["renamed_candidates"][0]
                       .contains("evidence"));
}

TEST(EvidenceExcluded, MarkerOnlyColumnWithSameMarkersIsRenamed) {
  std::vector<std::string> markers = {"", "-", "s/d", "N/A"};
  auto d = diff_snapshots(snap({id_col(), col("marcador", "text", markers), col("anio", "integer", years())}),
                          snap({id_col(), col("observacion", "text", markers), col("anio", "integer", years())}), profile_method());
  ASSERT_EQ(d.renamed_candidates.size(), 1u);
  EXPECT_EQ(d.renamed_candidates[0].to, "observacion");
  EXPECT_EQ(d.renamed_candidates[0].evidence, "value_set+position");
}

TEST(EvidenceExcluded, SameValueSetElsewhereIsNotARename) {
  // activo dropped, an unrelated S/N column appended at the end: same values, another place.
  auto d = diff_snapshots(
      snap({id_col(), col("activo", "text", {"S", "N"}), col("anio", "integer", years()), col("monto", "numeric", {"1.5", "2.5", "3.5", "4.5"})}),
      snap({id_col(), col("anio", "integer", years()), col("monto", "numeric", {"1.5", "2.5", "3.5", "4.5"}), col("tiene_deuda", "text", {"S", "N"})}),
      profile_method());
  EXPECT_TRUE(d.renamed_candidates.empty());
  EXPECT_TRUE(d.ambiguous_renames.empty());
}

TEST(EvidenceExcluded, OtherValuesTypeOrNullFractionInPlaceAreNotARename) {
  auto try_after = [](ColumnProfile c) {
    return diff_snapshots(snap({id_col(), col("sexo", "text", {"M", "F"}, 0.1), col("anio", "integer", years())}),
                          snap({id_col(), std::move(c), col("anio", "integer", years())}), profile_method());
  };
  EXPECT_TRUE(try_after(col("con_cobertura", "text", {"SI", "NO"}, 0.1)).renamed_candidates.empty());
  EXPECT_TRUE(try_after(col("genero", "character varying(1)", {"M", "F"}, 0.1)).renamed_candidates.empty());
  EXPECT_TRUE(try_after(col("genero", "text", {"M", "F"}, 0.3)).renamed_candidates.empty());
  EXPECT_EQ(try_after(col("genero", "text", {"M", "F"}, 0.12)).renamed_candidates.size(), 1u);  // within tolerance
}

TEST(EvidenceExcluded, TwoNewColumnsWithTheValueSetAreAmbiguous) {
  auto d = diff_snapshots(snap({id_col(), col("sexo", "text", {"M", "F"}), col("anio", "integer", years())}),
                          snap({id_col(), col("genero", "text", {"M", "F"}), col("anio", "integer", years()), col("sexo_tutor", "text", {"M", "F"})}),
                          profile_method());
  EXPECT_TRUE(d.renamed_candidates.empty());
  ASSERT_EQ(d.ambiguous_renames.size(), 1u);
  EXPECT_EQ(d.ambiguous_renames[0].from, "sexo");
  EXPECT_EQ(d.ambiguous_renames[0].candidates.size(), 2u);
}

TEST(EvidenceExcluded, TwoOldColumnsWithTheValueSetAreAmbiguous) {
  auto d = diff_snapshots(snap({id_col(), col("sexo", "text", {"M", "F"}), col("sexo_madre", "text", {"M", "F"}), col("anio", "integer", years())}),
                          snap({id_col(), col("genero", "text", {"M", "F"}), col("anio", "integer", years())}), profile_method());
  EXPECT_TRUE(d.renamed_candidates.empty());
  EXPECT_EQ(d.ambiguous_renames.size(), 2u);
}

TEST(EvidenceExcluded, EmptyColumnInPlaceWithRelatedNameIsRenamed) {
  auto d = diff_snapshots(snap({id_col(), empty_col("obs_cliente"), col("anio", "integer", years())}),
                          snap({id_col(), empty_col("obs_proveedor"), col("anio", "integer", years())}), profile_method());
  ASSERT_EQ(d.renamed_candidates.size(), 1u);
  EXPECT_EQ(d.renamed_candidates[0].from, "obs_cliente");
  EXPECT_EQ(d.renamed_candidates[0].evidence, "position+name");
  EXPECT_DOUBLE_EQ(d.renamed_candidates[0].similarity, kPositionNameScore);
  auto typo = diff_snapshots(snap({id_col(), empty_col("comentario")}), snap({id_col(), empty_col("comentarios")}), profile_method());
  ASSERT_EQ(typo.renamed_candidates.size(), 1u);
  EXPECT_EQ(typo.renamed_candidates[0].evidence, "position+name");
}

TEST(EvidenceExcluded, EmptyColumnReplacedByUnrelatedEmptyColumnIsNotARename) {
  // The bench's empty_swap: same place, same type, both empty, nothing in the names in common.
  auto d = diff_snapshots(snap({id_col(), empty_col("vacia"), col("anio", "integer", years())}),
                          snap({id_col(), empty_col("comentario"), col("anio", "integer", years())}), profile_method());
  EXPECT_TRUE(d.renamed_candidates.empty());
  EXPECT_TRUE(d.ambiguous_renames.empty());
}

TEST(EvidenceExcluded, EmptyColumnNeedsSameTypeAndALoneGap) {
  auto other_type = diff_snapshots(snap({id_col(), empty_col("obs_cliente"), col("anio", "integer", years())}),
                                   snap({id_col(), empty_col("obs_proveedor", "integer"), col("anio", "integer", years())}), profile_method());
  EXPECT_TRUE(other_type.renamed_candidates.empty());
  // Two unaccounted columns between the same neighbours: which is which is a guess.
  auto two = diff_snapshots(snap({id_col(), empty_col("obs_a"), empty_col("obs_b"), col("anio", "integer", years())}),
                            snap({id_col(), empty_col("obs_x"), empty_col("obs_y"), col("anio", "integer", years())}), profile_method());
  EXPECT_TRUE(two.renamed_candidates.empty());
  // Dropped from the middle, a related name appended at the end: another place.
  auto moved = diff_snapshots(snap({id_col(), empty_col("obs_cliente"), col("anio", "integer", years())}),
                              snap({id_col(), col("anio", "integer", years()), empty_col("obs_proveedor")}), profile_method());
  EXPECT_TRUE(moved.renamed_candidates.empty());
  // A column with values is never matched on place and name alone.
  auto valued = diff_snapshots(snap({id_col(), col("obs_cliente", "text", {"a", "b"}), col("anio", "integer", years())}),
                               snap({id_col(), col("obs_proveedor", "text", {"c", "d"}), col("anio", "integer", years())}), profile_method());
  EXPECT_TRUE(valued.renamed_candidates.empty());
}

TEST(EvidenceExcluded, ProfileRenamesAnchorThePlaces) {
  // Without the provincia rename as a neighbour, both columns would share one gap of two.
  auto d = diff_snapshots(snap({id_col(), col("provincia", "text", provinces()), empty_col("nota_cliente"), col("anio", "integer", years())}),
                          snap({id_col(), col("jurisdiccion", "text", provinces()), empty_col("nota_clientes"), col("anio", "integer", years())}),
                          profile_method());
  ASSERT_EQ(d.renamed_candidates.size(), 2u);
  std::map<std::string, std::string> by_from;
  for (const auto& r : d.renamed_candidates) by_from[r.from] = r.evidence;
  EXPECT_EQ(by_from["provincia"], "profile");
  EXPECT_EQ(by_from["nota_cliente"], "position+name");
}

// One relation (same database and OID): the attnum is the column, so a rename is certain even
// when the values share nothing, a retype under the new name is that column's, and a column
// dropped and re-added (new attnum) is never a rename, whatever its values.
TEST(EvidenceDiff, SameRelationRenamesByAttnum) {
  auto before = snap({col("provincia", "text", provinces()), col("codigo", "integer", years()), col("obs", "text", {"a1", "a2", "a3", "a4", "a5"})});
  auto after = snap({col("jurisdiccion", "text", {"x", "y", "z", "w"}), col("code", "bigint", {}), col("obs2", "text", {"a1", "a2", "a3", "a4", "a5"})});
  after.columns[2].ordinal = 5;  // obs dropped (attnum 3), obs2 added as attnum 5 with obs's values
  for (auto* s : {&before, &after}) {
    s->database_name = "appdb";
    s->table_oid = 16400;
  }
  for (auto m : {RenameMethod::reference, RenameMethod::profile}) {
    DiffOptions opt;
    opt.method = m;
    auto d = diff_snapshots(before, after, opt);
    ASSERT_EQ(d.renamed_candidates.size(), 2u) << to_string(m);
    EXPECT_EQ(d.renamed_candidates[0].from, "codigo");
    EXPECT_EQ(d.renamed_candidates[0].to, "code");
    EXPECT_EQ(d.renamed_candidates[0].evidence, "attnum");
    EXPECT_EQ(d.renamed_candidates[0].similarity, 1.0);
    EXPECT_EQ(d.renamed_candidates[1].from, "provincia");
    EXPECT_EQ(d.renamed_candidates[1].to, "jurisdiccion");
    EXPECT_TRUE(d.ambiguous_renames.empty());
    ASSERT_EQ(d.type_changed.size(), 1u);
    EXPECT_EQ(d.type_changed[0].column, "code");
    EXPECT_EQ(d.type_changed[0].from, "integer");
  }
  // Another OID (a recreate): the values decide again, and obs → obs2 is matched by them.
  after.table_oid = 16401;
  auto d = diff_snapshots(before, after);
  ASSERT_EQ(d.renamed_candidates.size(), 1u);
  EXPECT_EQ(d.renamed_candidates[0].from, "obs");
  EXPECT_EQ(d.renamed_candidates[0].evidence, "");
}
