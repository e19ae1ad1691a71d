// The proxy/capture seam's enums (capture/target.hpp) against the text they become: every target
// kind is a spelling the catalog statement branches on (a kind it does not know would find no
// table, silently), and every reason reads back as itself.
#include <gtest/gtest.h>

#include <string>

#include "capture/capture.hpp"
#include "capture/catalog_queries.hpp"

using namespace predrop::capture;

TEST(TargetKinds, EveryKindIsOneTheCatalogStatementNames) {
  for (auto kind : {TargetKind::relation, TargetKind::schema, TargetKind::owned_by, TargetKind::after_by_name,
                    TargetKind::after_by_oid}) {
    SnapshotRequest req;
    req.targets.push_back({kind, "public", "t", {"r"}, {}, 16384});
    for (bool naive : {false, true}) {
      const auto q = capture_query(req, ProfileBounds{}, naive);
      EXPECT_NE(q.sql.find("'" + std::string(to_string(kind)) + "'"), std::string::npos) << to_string(kind);
      ASSERT_FALSE(q.params.empty());
      EXPECT_NE(q.params[0].value_or("").find(std::string(to_string(kind))), std::string::npos) << q.params[0].value_or("");
    }
  }
}

TEST(TargetKinds, OnlyRelationsCarryTheirSchema) {
  SnapshotRequest req;
  req.targets.push_back({TargetKind::relation, "s1", "t", {}, {}, 0});
  req.targets.push_back({TargetKind::schema, "ignored", "s2", {}, {}, 0});
  req.targets.push_back({TargetKind::after_by_oid, "s3", "t3", {}, {}, 4242});
  const auto q = capture_query(req, ProfileBounds{}, false);
  ASSERT_GE(q.params.size(), 3u);
  EXPECT_EQ(q.params[1].value_or(""), R"({"s1","",""})");
  EXPECT_EQ(q.params[2].value_or(""), R"({"t","s2","4242"})");
}

TEST(SnapshotReasons, EachReadsBackAsItself) {
  for (auto r : {SnapshotReason::pre_drop, SnapshotReason::post_create, SnapshotReason::post_alter,
                 SnapshotReason::post_analyze}) {
    EXPECT_EQ(snapshot_reason_from_string(to_string(r)), r) << to_string(r);
    EXPECT_EQ(is_after(r), to_string(r).rfind("post_", 0) == 0) << to_string(r);
  }
  // The store's other reasons are not predrop's to take (a baseline is the CLI's).
  EXPECT_FALSE(snapshot_reason_from_string("baseline"));
  EXPECT_FALSE(snapshot_reason_from_string(""));
}
