// The hold: a destructive statement waits, whole in the client's buffer, until every target's
// snapshot is written, the capture fails, hold_timeout_ms passes, the client cancels it or leaves.
// One hold at a time per session. The hold decides everything about it: its plan, its timer, its
// policy snapshot, every way it ends and the stand-in that goes in the statement's place
// (proxy/stand_in.hpp), and the outcome checks it leaves for the transaction's end. The session
// (its HoldHost) keeps the sockets: it begins a hold on a judged message and, when told how the
// hold ended, moves the bytes.
#pragma once

#include <boost/asio.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "capture/capture.hpp"
#include "parser/parser.hpp"
#include "policy/policy.hpp"
#include "proxy/hold_machine.hpp"
#include "quarantine/substitute.hpp"
#include "proxy/stand_in.hpp"

namespace predrop::proxy {

// What a hold needs to know about the statement and the session it runs in.
struct HoldInput {
  char type = 0;                     // 'Q' or 'E'
  uint64_t held_bytes = 0;           // the whole message, header included
  std::shared_ptr<const parser::Facts> facts;
  capture::StatementContext context;
  parser::SearchPathTracker search_path;   // as the server will have it when the statement runs
  char transaction_status = 'I';
  std::string user;
  uint64_t session = 0;
  // Outcome checks of the session's open transaction's earlier holds: 0 for the first DROP of a
  // transaction (autocommit's every DROP), more for a later one.
  size_t checks_awaiting_end = 0;
  bool tracks_shape_changes = false;   // the decoder wants the captured tables (HoldEnd::captured)
};

// One capture target with the policy decision that covers it.
struct HoldPlan {
  capture::SnapshotRequest request;
  std::vector<std::pair<std::string, std::string>> skipped;   // schema, table: a rule says skip
  bool fail_closed = false;
  quarantine::QuarantinePlan quarantine;   // statements a quarantine rule covers: substituted once released
};
// The rule that covers a relation, for the session `who`. Unqualified names (schema empty) are decided
// by the first schema of `effective` that a rule names, else its first; schema_for_policy says which
// schema decided.
policy::Decision decide_relation(const policy::Config& cfg, const std::string& db, const policy::Who& who,
                                 const parser::RelationName& relation, parser::DestroyKind kind,
                                 const std::vector<std::string>& effective, std::string& schema_for_policy);
// The session a statement's context describes, as rules match it.
policy::Who who_of(const capture::StatementContext& context);
// Which targets to capture and whether a failure refuses the statement: policy applied to facts.
HoldPlan plan_hold(const policy::Config& cfg, const HoldInput& in);

// The capture as a hold uses it: the capture service in serve (CaptureForHold, proxy/hold.cpp), an
// in-memory one in tests/fuzz/fuzz_hold.cpp.
class HoldCapture {
 public:
  virtual ~HoldCapture() = default;
  // `done` may run on any thread.
  virtual void snapshot(capture::SnapshotRequest request, std::function<void(capture::SnapshotResult)> done) = 0;
  virtual void record_event(capture::EventRecord event) = 0;
  virtual void mark_hold(const std::vector<capture::TableResult>& tables, double hold_ms) = 0;
};

// The capture service behind the HoldCapture seam.
class CaptureForHold final : public HoldCapture {
 public:
  explicit CaptureForHold(capture::CaptureService& service) : service_(service) {}
  void snapshot(capture::SnapshotRequest request, std::function<void(capture::SnapshotResult)> done) override;
  void record_event(capture::EventRecord event) override;
  void mark_hold(const std::vector<capture::TableResult>& tables, double hold_ms) override;

 private:
  capture::CaptureService& service_;
};

// A ledger row for an intercepted statement that never reaches a capture (a rule skipped it,
// snapshots are off, the parser could not read it); nothing without a capture.
void record_intercepted(HoldCapture* capture, capture::StatementContext context, capture::SnapshotOutcome outcome,
                        std::string schema = {}, std::string table = {});

// How a hold ended, for its host to apply to the held message (whole in the client's buffer).
struct HoldEnd {
  HoldEnding ending = HoldEnding::released;
  // Empty: the held message goes as it is (released, failed_open) or is dropped with the session
  // (client_left). Else the message is dropped and the stand-in's bytes go in its place.
  std::optional<StandIn> stand_in;
  // The tables the capture kept, for the decoder's after tracking (HoldInput::tracks_shape_changes).
  std::vector<HeldTable> captured;
  // Its DROPs' outcome checks, for the transaction tracker: known when the transaction ends.
  std::vector<capture::PendingOutcome> outcome_checks;
};

// What a hold needs of the session it holds for: where its callbacks run, whether the session still
// lives when they do, and someone to move the bytes once it has ended.
class HoldHost {
 public:
  virtual boost::asio::any_io_executor hold_executor() = 0;
  virtual std::weak_ptr<void> hold_lifetime() = 0;
  // Called once per hold, never from inside Hold::begin.
  virtual void hold_ended(HoldEnd end) = 0;

 protected:
  ~HoldHost() = default;
};

class Hold {
 public:
  explicit Hold(HoldHost& host) : host_(host) {}
  Hold(const Hold&) = delete;
  Hold& operator=(const Hold&) = delete;

  bool active() const { return machine_.active(); }
  uint64_t held_bytes() const { return held_bytes_; }
  const capture::StatementContext* context() const { return context_.get(); }   // the last hold's
  std::chrono::steady_clock::time_point started() const { return started_; }
  uint64_t count() const { return count_; }                 // holds this session began
  const std::string& tables() const { return tables_; }     // the last hold's targets, for the console

  // Starts holding the message under `cfg`; capture null: predrop runs without one (nothing is
  // waited for). It ends later through HoldHost::hold_ended.
  void begin(HoldInput in, std::shared_ptr<const policy::Config> cfg, HoldCapture* capture);
  void cancel();        // a CancelRequest carried this session's key
  void client_gone();   // Terminate, close_notify or end of stream from the client
  // The session closes: no ending, no callback from now on.
  void stop();

 private:
  void on_capture_done(uint64_t id, capture::SnapshotResult result);
  void on_timeout(uint64_t id);
  void end(HoldEnding ending, std::string sqlstate = {}, std::string message = {}, std::vector<HeldTable> captured = {},
           std::vector<capture::PendingOutcome> outcome_checks = {});

  HoldHost& host_;
  HoldMachine machine_;
  bool stopped_ = false;
  std::shared_ptr<const policy::Config> cfg_;   // the policy in force when this hold began
  HoldCapture* capture_ = nullptr;
  char type_ = 0;
  uint64_t held_bytes_ = 0;
  uint64_t count_ = 0;
  std::string tables_;
  bool tracks_shape_changes_ = false;
  std::chrono::steady_clock::time_point started_;
  // Allocated on the first hold: most sessions never hold, and an idle session should cost little.
  std::unique_ptr<capture::StatementContext> context_;
  std::unique_ptr<quarantine::SubstitutedText> substitute_;
  std::string quarantine_schema_;   // of this hold's quarantine, for its outcome check
  std::string quarantine_hold_id_;  // its move's mark on what it moves (QuarantineMove::hold_id)
  int64_t quarantine_retention_s_ = 0;
  std::unique_ptr<boost::asio::steady_timer> timer_;
};

}  // namespace predrop::proxy
