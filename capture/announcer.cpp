#include "capture/announcer.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "capture/snapshot.hpp"
#include "capture/store_writer.hpp"

namespace predrop::capture {

namespace {

// In the order given. The commit need not wait for its WAL flush: a crash loses only the
// announcements, as a lost connection would, and the rows they announce are in the store.
constexpr const char* kAnnounceSql = R"SQL(
SELECT count(pg_notify($2, u.p)), pg_catalog.set_config('synchronous_commit', 'off', true)
  FROM unnest($1::text[]) WITH ORDINALITY AS u(p, o)
)SQL";

}  // namespace

Announcer::Announcer(LedgerWriter& ledger, CaptureCounters& counters, std::function<void()> want_window)
    : ledger_(ledger), counters_(counters), want_window_(std::move(want_window)) {}

void Announcer::add(std::string payload) {
  if (waiting_.size() >= kMaxWaiting) {
    if (counters_.announcements_lost++ == 0)
      spdlog::error("predrop: {} snapshot announcements wait for a store that does not answer; the oldest are dropped "
                    "(predrop_snapshot_announcements_lost_total)", waiting_.size());
    waiting_.pop_front();
  }
  waiting_.push_back(std::move(payload));
  want_window_();
}

void Announcer::flush() {
  if (in_flight_ || waiting_.empty()) return;
  in_flight_ = true;
  const size_t n = std::min(waiting_.size(), kMaxBatch);
  std::vector<std::optional<std::string>> batch(std::make_move_iterator(waiting_.begin()),
                                                std::make_move_iterator(waiting_.begin() + static_cast<long>(n)));
  waiting_.erase(waiting_.begin(), waiting_.begin() + static_cast<long>(n));
  ledger_.exec(
      [payloads = pg_array_literal(batch)](const StoreSql&) {
        return BatchQuery{"predrop_announce_v1", kAnnounceSql, {payloads, std::string(kSnapshotChannel)}};
      },
      "snapshot announcements",
      [this] {
        in_flight_ = false;
        flush();
      },
      [this, n](const PgResult&) { counters_.announced += n; });
}

}  // namespace predrop::capture
