// The announcements of the rows the capture service writes (pg_notify on kSnapshotChannel, README
// "The snapshot event stream"), sent after their writes have committed, in the order the writes
// were answered, by a statement of their own.
//
// Why not in the write: a NOTIFY serialises every notifying commit on the server (it takes one
// lock for the whole cluster until its transaction ends), so a hold's store write waited on every
// other write's commit. At 32 clients recreating tables with fsync on it was half of a hold's
// store write (issue 21: 7.3-10.9 ms against 3.9-5.7 ms without, and 124-159 against 153-174
// recreate cycles a second). One announcer sends for all the writes, one statement at a time, so
// the order a listener hears is still the order the writes committed in, as predrop saw them
// answered: a pair's before is always announced before its after, whose write found the before
// committed.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>

#include "capture/capture_counters.hpp"
#include "capture/ledger_writer.hpp"

namespace predrop::capture {

class Announcer {
 public:
  // want_window: the service's window (capture_service.cpp), at whose end flush() runs.
  Announcer(LedgerWriter& ledger, CaptureCounters& counters, std::function<void()> want_window);

  // Event-loop thread. The payload of a row whose write has committed.
  void add(std::string payload);
  // Sends what waits, in one statement, unless one is out already (it sends the rest when answered).
  void flush();
  size_t waiting() const { return waiting_.size(); }

  // Past this many waiting (the store does not answer), the oldest are dropped and counted.
  static constexpr size_t kMaxWaiting = 10000;
  // At most this many in one statement.
  static constexpr size_t kMaxBatch = 1000;

 private:
  LedgerWriter& ledger_;
  CaptureCounters& counters_;
  std::function<void()> want_window_;
  std::deque<std::string> waiting_;
  bool in_flight_ = false;
};

}  // namespace predrop::capture
