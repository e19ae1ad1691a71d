// The job pipeline of a snapshot request: capture connection (bounded pool, per database) -> one
// batched catalog and bounded pg_stats query -> optional enrichment -> store connection
// (its own bounded pool) -> one statement writing snapshots, dedup and ledger rows. A timer per
// request enforces its deadline: done() runs once, with timeout, and whatever connection was busy
// for it is cancelled and closed. An after's write and a hold's write of the same table never run
// at once (meets_other_write). Runs on the event-loop thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "capture/capture.hpp"
#include "capture/capture_counters.hpp"
#include "capture/conn_pool.hpp"
#include "capture/announcer.hpp"
#include "capture/ledger_writer.hpp"
#include "capture/store_health.hpp"

namespace predrop::capture {

struct SnapshotJob;
using JobPtr = std::shared_ptr<SnapshotJob>;

class SnapshotPipeline {
 public:
  // cfg is the service's, read on the event-loop thread.
  SnapshotPipeline(boost::asio::io_context& io, const CaptureConfig& cfg, ConnPool& capture_pool, ConnPool& store_pool,
                   LedgerWriter& ledger, Announcer& announcer, StoreHealth& health, CaptureCounters& counters,
                   LedgerWriter::SqlFor sql_for);

  // From any thread: the request starts on the event-loop thread, after `first` runs there.
  void submit(SnapshotRequest request, std::function<void(SnapshotResult)> done, std::function<void()> first = {});
  // Ends every request still running with capture_error.
  void shutdown();

  using TableKey = std::pair<std::string, uint32_t>;   // database, table OID

 private:
  void start(JobPtr job);
  // background: the request yields to every request that is not (an after waits for holds).
  void acquire(const JobPtr& job, ConnPool& pool, const std::string& key, std::function<void()> next,
               bool background = false);
  void release(const JobPtr& job, bool reusable = true);
  bool retry_if_closed(const JobPtr& job, ConnPool& pool, const std::string& key, std::function<void()> next);
  void run(const JobPtr& job, const BatchQuery& q, std::function<void(PgResult)> next);
  void writable(const JobPtr& job, std::function<void(std::function<void()> done)> body, std::function<void()> next);
  void prepare(const JobPtr& job);
  void yield(const JobPtr& job);
  // A table the yield found, with its comment (the quarantine's JSON) for its store row.
  struct PurgedTable {
    YieldedTable table;
    std::string detail;
  };
  void record_yielded(const JobPtr& job, const std::vector<PurgedTable>& purged);
  void read_catalog(const JobPtr& job);
  void enrich(const JobPtr& job, int which);
  void build_rows(const JobPtr& job, std::optional<SnapshotOutcome> failure, const std::string& error);
  void write(const JobPtr& job);
  void send_write(const JobPtr& job);
  bool meets_other_write(const JobPtr& job) const;
  void begin_write(const JobPtr& job);
  void end_write(const JobPtr& job);
  void date_before_meanwhile(const JobPtr& job);
  void start_capture(const JobPtr& job);
  bool groupable(const JobPtr& job) const;
  static void forget(std::vector<JobPtr>& waiting, const JobPtr& job);
  static void forget_finished(std::vector<JobPtr>& jobs);
  void gather(const JobPtr& leader, std::vector<JobPtr>& waiting, ConnPool& pool,
              const std::function<bool(const JobPtr&)>& fits);
  void let_riders_go(const JobPtr& leader);
  void finish(const JobPtr& job, SnapshotResult res);
  void fail(const JobPtr& job, SnapshotOutcome outcome, const std::string& error);

  boost::asio::io_context& io_;
  const CaptureConfig& cfg_;
  ConnPool& capture_pool_;
  ConnPool& store_pool_;
  LedgerWriter& ledger_;
  Announcer& announcer_;
  StoreHealth& health_;
  CaptureCounters& counters_;
  LedgerWriter::SqlFor sql_for_;
  std::set<JobPtr> jobs_;
  std::set<std::string> prepared_;   // database + '\n' + the id of a PrepareStep that succeeded
  // Requests waiting for a capture / store connection that another's statement may carry.
  std::vector<JobPtr> capture_waiting_, store_waiting_;
  // Tables whose write is in flight, by how many holds' and afters' writes carry each, and the
  // writes that wait for them (meets_other_write).
  struct Writing {
    int holds = 0, afters = 0;
  };
  std::map<TableKey, Writing> writing_;
  std::vector<JobPtr> writes_deferred_;
  static constexpr size_t kGroupMax = 64;
};

}  // namespace predrop::capture
