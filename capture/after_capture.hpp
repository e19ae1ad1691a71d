// The "after" of a committed shape change, off every client's path: a bounded queue of after
// requests run a few at a time (capture connections go to holds first), and a bounded list of
// afters still waiting for statistics, checked with one pg_stat_user_tables query per database
// and period; once ANALYZE (or autovacuum) has run, the profile is captured again (post_analyze).
// An after's targets are after_by_oid (a table a hold snapshotted, or one waiting for statistics) or
// after_by_name (capture/target.hpp); their partitions are not expanded as a hold's are.
// Runs on the capture service's event-loop thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <string>

#include "capture/announcer.hpp"
#include "capture/capture.hpp"
#include "capture/capture_counters.hpp"
#include "capture/conn_pool.hpp"
#include "capture/ledger_writer.hpp"
#include "capture/snapshot_pipeline.hpp"
#include "capture/store_writer.hpp"

namespace predrop::capture {

class AfterCapture {
 public:
  // want_window: the service's window (capture_service.cpp, sweep) is to end once more, and call
  // end_window then; called on the event-loop thread whenever a copy waits.
  AfterCapture(boost::asio::io_context& io, const CaptureConfig& cfg, SnapshotPipeline& pipeline, ConnPool& capture_pool,
               LedgerWriter& ledger, Announcer& announcer, CaptureCounters& counters, std::function<void()> want_window);
  void submit(SnapshotRequest request);
  // A hold's snapshot was written: an after still waiting for the same table (by OID, or by name:
  // see absorb's rule) would read the very shape that before holds, or, if the hold's statement
  // drops it, nothing at all. It is written as a copy of that before instead, with no catalog read.
  // An after already being read (running_) is told of that before instead (befores_meanwhile): it is
  // dated before it, or becomes its copy if it finds the table gone. `database` and `session` are
  // the hold's; the rule of what matches is before_is_after_of (after_capture.cpp).
  void absorb(const std::string& database, uint64_t session, const SnapshotResult& result);
  // The window ended: the copies gathered in it go as one statement (unless one is still out:
  // then they go when it is answered).
  void end_window();
  // Writes the copies gathered so far now rather than at the end of their window (stopping).
  void flush_copies();
  void shutdown();

 private:
  struct Waiting {
    StatementContext ctx;
    std::string after_id;
    uint32_t oid = 0;
    std::string schema, table;
    std::chrono::steady_clock::time_point expires;
  };
  void pump();
  void done(const SnapshotRequest& req, const SnapshotResult& result);
  void want_copies();
  void analyze(const std::string& database, const std::vector<TableResult>& tables);
  void arm_poll();
  void poll();
  void poll_database(const std::string& database, std::vector<Waiting> waiting);
  void publish();
  void write_copies(bool now = false);

  const CaptureConfig& cfg_;
  SnapshotPipeline& pipeline_;
  ConnPool& capture_pool_;
  LedgerWriter& ledger_;
  Announcer& announcer_;
  CaptureCounters& counters_;
  struct Queued {
    SnapshotRequest request;
    std::chrono::steady_clock::time_point ready;   // not started before (cfg.after_delay)
  };
  std::deque<Queued> queue_;
  boost::asio::steady_timer delay_timer_;
  bool delay_armed_ = false;
  // Afters being read and written by the pipeline (their befores_meanwhile filled by absorb).
  std::list<SnapshotRequest> running_;
  // By (database, oid): one after per table waits, the newest.
  std::map<std::pair<std::string, uint32_t>, Waiting> waiting_;
  boost::asio::steady_timer poll_timer_;
  bool poll_armed_ = false;
  int polls_running_ = 0;
  bool stopped_ = false;
  // Afters absorbed in this window, written together (write_copies).
  std::vector<AfterCopy> copies_;
  std::function<void()> want_window_;
  bool copy_in_flight_ = false;   // a copy statement not yet answered (write_copies)
};

}  // namespace predrop::capture
