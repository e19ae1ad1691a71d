// A capture test's two throwaway databases on the test cluster: the source whose tables are
// snapshotted and the migrated store the snapshots land in, with a CaptureConfig pointing at them.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "capture/capture.hpp"
#include "pg_test_util.hpp"

namespace predrop::capture::testing {

class CaptureDatabasesTest : public ::testing::Test {
 protected:
  // prefix names the databases (PREFIX_src_…, PREFIX_store_…), so a leftover says which test made it.
  explicit CaptureDatabasesTest(std::string prefix) : prefix_(std::move(prefix)) {}
  void SetUp() override {
    ASSERT_TRUE(have_cluster()) << "PGHOST/PGPORT not set (run through scripts/test.sh)";
    src = std::make_unique<TempDatabase>(prefix_ + "_src");
    store = std::make_unique<TempDatabase>(prefix_ + "_store");
    auto m = migrate(conninfo_for(store->name()));
    ASSERT_TRUE(m.ok) << m.error;
    cfg.capture_conninfo = base_conninfo();
    cfg.store_conninfo = conninfo_for(store->name());
    db = std::make_unique<Db>(src->name());
    sdb = std::make_unique<Db>(store->name());
  }
  void TearDown() override {
    db.reset();
    sdb.reset();
  }
  std::unique_ptr<TempDatabase> src, store;
  std::unique_ptr<Db> db, sdb;
  CaptureConfig cfg;

 private:
  std::string prefix_;
};

}  // namespace predrop::capture::testing
