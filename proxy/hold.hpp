// The hold: a destructive statement waits, whole in the client's buffer, until every target's
// snapshot is written, the capture fails, hold_timeout_ms passes, the client cancels it or leaves.
// One hold at a time per session; it owns its timer and its policy snapshot. Its ending runs in
// Session::end_hold (proxy/hold.cpp), which writes the stand-in bytes and moves the buffers.
#pragma once

#include <boost/asio.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "capture/capture.hpp"
#include "parser/parser.hpp"
#include "policy/policy.hpp"
#include "proxy/hold_machine.hpp"
#include "proxy/quarantine.hpp"

namespace predrop::proxy {

class Session;

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
};

// One capture target with the policy decision that covers it.
struct HoldPlan {
  capture::SnapshotRequest request;
  std::vector<std::pair<std::string, std::string>> skipped;   // schema, table: a rule says skip
  bool fail_closed = false;
  QuarantinePlan quarantine;   // statements a quarantine rule covers: substituted once released
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

class Hold {
 public:
  explicit Hold(Session& session) : session_(session) {}
  Hold(const Hold&) = delete;
  Hold& operator=(const Hold&) = delete;

  bool active() const { return machine_.active(); }
  char type() const { return type_; }
  uint64_t held_bytes() const { return held_bytes_; }
  const capture::StatementContext* context() const { return context_.get(); }
  std::chrono::steady_clock::time_point started() const { return started_; }
  uint64_t count() const { return count_; }                 // holds this session began
  const std::string& tables() const { return tables_; }     // the last hold's targets, for the console
  // What reaches the server in place of the held message once it is released: the client's text with
  // its quarantined statements substituted (proxy/quarantine.hpp). Null: the message as it is.
  const SubstitutedText* substitute() const { return substitute_.get(); }

  // Starts holding the message; it ends later through Session::end_hold, never from inside begin.
  void begin(HoldInput in);
  void cancel();        // a CancelRequest carried this session's key
  void client_gone();   // Terminate, close_notify or end of stream from the client
  void stop();          // the session closes: timers off, no ending

 private:
  void on_capture_done(uint64_t id, capture::SnapshotResult result);
  void on_timeout(uint64_t id);
  void end(HoldEnding ending, std::string sqlstate = {}, std::string message = {});

  Session& session_;
  HoldMachine machine_;
  std::shared_ptr<const policy::Config> cfg_;   // the policy in force when this hold began
  char type_ = 0;
  uint64_t held_bytes_ = 0;
  uint64_t count_ = 0;
  std::string tables_;
  std::chrono::steady_clock::time_point started_;
  // Allocated on the first hold: most sessions never hold, and an idle session should cost little.
  std::unique_ptr<capture::StatementContext> context_;
  std::unique_ptr<SubstitutedText> substitute_;
  std::string quarantine_schema_;   // of this hold's quarantine, for its outcome check
  int64_t quarantine_retention_s_ = 0;
  std::unique_ptr<boost::asio::steady_timer> timer_;
};

}  // namespace predrop::proxy
