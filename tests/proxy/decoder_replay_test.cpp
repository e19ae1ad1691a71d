// Real sessions recorded from PostgreSQL 15 (tests/proxy/sessions/, record-session.py and
// record-probes.py) replayed into the decoder in their original interleaving of directions: fed as
// recorded, byte by byte, and in random chunks, the events are the same, and no reply of a real
// server goes unmatched (desync 0).
#include <gtest/gtest.h>

#include <random>

#include "decoder_test_util.hpp"
#include "parser/parser.hpp"

namespace dectest {
namespace {

using predrop::parser::Classifier;
using Strings = std::vector<std::string>;
const Strings kDefaultPath{"$user", "public"};

std::string session_path(const std::string& name) { return std::string(PREDROP_DECODER_SESSIONS_DIR) + "/" + name; }

// How each chunk is cut before it is fed: 0 whole, 1 byte by byte, otherwise random pieces of
// 1..n bytes from a fixed seed.
struct Replay {
  std::vector<std::string> events;
  DecoderStats stats;
  size_t owed_at_end = 0;
  Strings search_path;
  size_t peak_capacity = 0;
};

Replay replay(const std::vector<Chunk>& chunks, size_t max_piece, uint32_t seed, FrameLimits limits = {}) {
  Classifier classifier;
  Decoder d(classifier, kDefaultPath);
  Replayer r(d, limits);
  std::mt19937 rng(seed);
  Replay out;
  for (const Chunk& c : chunks) {
    std::string_view rest = c.bytes;
    while (!rest.empty()) {
      size_t n = max_piece == 0 ? rest.size()
                 : max_piece == 1 ? 1
                                  : std::uniform_int_distribution<size_t>(1, max_piece)(rng);
      n = std::min(n, rest.size());
      r.feed(c.backend, rest.substr(0, n));
      rest.remove_prefix(n);
      out.peak_capacity = std::max(out.peak_capacity, d.owed().capacity_in_use());
    }
  }
  EXPECT_FALSE(r.lost);
  out.events = std::move(r.events);
  out.stats = d.stats();
  out.owed_at_end = d.owed().size();
  out.search_path = d.search_path().current();
  return out;
}

struct SessionCase {
  const char* file;
  uint64_t min_messages;   // a floor, so that an empty or mis-parsed recording fails
};

class RecordedSession : public ::testing::TestWithParam<SessionCase> {};

TEST_P(RecordedSession, EverySplitGivesTheEventsOfTheWholeFeedAndNoDesync) {
  auto chunks = load_session(session_path(GetParam().file));
  Replay whole = replay(chunks, 0, 0);
  EXPECT_EQ(whole.stats.desync, 0u);
  EXPECT_EQ(whole.stats.malformed, 0u);
  EXPECT_EQ(whole.owed_at_end, 0u);   // every session ends with the Terminate after its last reply
  EXPECT_GE(whole.stats.frontend_messages + whole.stats.backend_messages, GetParam().min_messages);
  EXPECT_EQ(whole.events.size(), whole.stats.frontend_messages + whole.stats.backend_messages);
  std::vector<std::pair<size_t, uint32_t>> splits = {{1, 0}, {2, 1}, {7, 2}, {64, 3}, {1500, 4}, {3, 5}};
  for (auto [piece, seed] : splits) {
    SCOPED_TRACE("pieces of up to " + std::to_string(piece) + " bytes, seed " + std::to_string(seed));
    Replay split = replay(chunks, piece, seed);
    ASSERT_EQ(split.events.size(), whole.events.size());
    for (size_t i = 0; i < whole.events.size(); ++i) ASSERT_EQ(split.events[i], whole.events[i]) << "message " << i;
    EXPECT_EQ(split.search_path, whole.search_path);
    EXPECT_EQ(split.stats.uninspected, whole.stats.uninspected);
  }
}

INSTANTIATE_TEST_SUITE_P(Sessions, RecordedSession,
                         ::testing::Values(SessionCase{"psql.bin", 60}, SessionCase{"pgbench_extended.bin", 200},
                                           SessionCase{"pgbench_prepared.bin", 200}, SessionCase{"libpq_pipeline.bin", 18000},
                                           SessionCase{"libpq_prepare.bin", 80}, SessionCase{"jdbc_batch.bin", 600},
                                           SessionCase{"probe_extended_set_error.bin", 20},
                                           SessionCase{"probe_extended_set_local.bin", 20},
                                           SessionCase{"probe_long_error.bin", 20}, SessionCase{"probe_long_bind.bin", 20},
                                           SessionCase{"probe_long_portal_name.bin", 10}, SessionCase{"probe_reparse.bin", 20},
                                           SessionCase{"probe_extended_copy_in.bin", 20},
                                           SessionCase{"probe_failed_copy_in.bin", 20}),
                         [](const auto& info) {
                           std::string n = info.param.file;
                           n = n.substr(0, n.find('.'));
                           return n;
                         });

// What the recordings show the server did, checked against what the decoder concluded.

TEST(RecordedProbe, PsqlEndsWithTheSearchPathItSetLast) {
  Replay r = replay(load_session(session_path("psql.bin")), 0, 0);
  EXPECT_EQ(r.search_path, Strings{"public"});
}

TEST(RecordedProbe, DeepLibpqPipelineKeepsTheOwedQueueCompact) {
  Replay r = replay(load_session(session_path("libpq_pipeline.bin")), 0, 0);
  // 2,000 queries of one Sync, 4 entries each: the queue holds them all at once at most.
  EXPECT_LE(r.peak_capacity, 8200u);
  EXPECT_EQ(r.stats.desync, 0u);
}

TEST(RecordedProbe, ExtendedSegmentRolledBackByItsErrorRollsTheSetBack) {
  // SET search_path in one Execute, then an Execute that fails, one Sync: the server's SHOW says
  // "$user", public (the segment was one implicit transaction, rolled back).
  Replay r = replay(load_session(session_path("probe_extended_set_error.bin")), 0, 0);
  EXPECT_EQ(r.search_path, kDefaultPath);
}

TEST(RecordedProbe, ErrorLongerThan64KiBIsStillAnError) {
  // "SET search_path = dectest_evil; SELECT repeat('x', 70000)::int": the server's error is 70 KB
  // long and rolls the SET back (its SHOW says "$user", public). An extended segment with such an
  // error skips to its Sync.
  Replay r = replay(load_session(session_path("probe_long_error.bin")), 0, 0);
  EXPECT_EQ(r.search_path, kDefaultPath);
  EXPECT_EQ(r.stats.desync, 0u);
}

TEST(RecordedProbe, BindLongerThanTheInspectLimitStillNamesItsPortal) {
  // Parse s1 "DROP TABLE dectest_victim"; Bind p s1 with 600 result format codes (1,221 bytes,
  // above max_inspect_bytes 1024); Execute p: the server dropped the table (its probe says so).
  // The Execute must be judged as the DROP it runs.
  auto chunks = load_session(session_path("probe_long_bind.bin"));
  Classifier classifier;
  Decoder d(classifier, kDefaultPath);
  Replayer r(d, FrameLimits{.max_message_bytes = 1u << 30, .max_inspect_bytes = 1024});
  for (const auto& c : chunks) r.feed(c.backend, c.bytes);
  bool execute_judged_destructive = false;
  for (const auto& e : r.events)
    if (e.rfind("F E ", 0) == 0 && e.find(" judge k1 ") != std::string::npos && e.find("D:") != std::string::npos)
      execute_judged_destructive = true;
  EXPECT_TRUE(execute_judged_destructive) << ::testing::PrintToString(r.events);
}

TEST(RecordedProbe, SyncSentDuringExtendedCopyInOwesNothing) {
  // P/B/E "COPY dectest_copy FROM STDIN", S, CopyData, CopyDone, S: the server ignores the Sync
  // that reaches it in copy-in mode and sends one ReadyForQuery, after CommandComplete "COPY 2".
  Replay r = replay(load_session(session_path("probe_extended_copy_in.bin")), 0, 0);
  EXPECT_EQ(r.stats.desync, 0u);
  EXPECT_EQ(r.owed_at_end, 0u);
}

TEST(RecordedProbe, CopyDataOfACopyThatNeverBeganOwesNothing) {
  // P/B/E "COPY dectest_no_such_table FROM STDIN", S, CopyData, CopyDone, P/B/E "SELECT 1", S: the
  // server answers 1 2 E(42P01) Z, ignores the CopyData and CopyDone, then 1 2 D C Z.
  Replay r = replay(load_session(session_path("probe_failed_copy_in.bin")), 0, 0);
  EXPECT_EQ(r.stats.desync, 0u);
  EXPECT_EQ(r.owed_at_end, 0u);
}

}  // namespace
}  // namespace dectest
