// The transactions of one session, as far as predrop acts on how they end (issue 24): the shape
// changes each completed (the afters), the tables its held DROPs snapshotted (the before a recreate
// completes), savepoints released or rolled back to, and PREPARE TRANSACTION with its later COMMIT or
// ROLLBACK PREPARED, and the outcome checks of the DROPs its holds snapshotted. The decoder
// (proxy/decoder.hpp) feeds it what the server completed and how each transaction ended, read off
// the wire; the session adds each hold's outcome checks and reads what to act on: the afters
// (proxy/after.cpp) and, at the transaction's end, the outcome checks (proxy/relay.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "capture/outcome.hpp"
#include "parser/parser.hpp"

namespace predrop::proxy {

// A table a hold snapshotted for the statement it held: the after of that statement's change
// names this before (its pair) and follows the table by OID, whatever it is called by then.
struct HeldTable {
  std::string schema, table;
  uint32_t oid = 0;
  std::string snapshot_id;
};

// A shape change the server completed (parser::ShapeChange), with what the after needs of it.
struct CompletedChange {
  parser::ShapeChange change;
  // The session's path when it ran: "$user" kept while it named the login user, written out as
  // the role a SET ROLE or SET SESSION AUTHORIZATION made current.
  std::vector<std::string> search_path;
  std::shared_ptr<const parser::Facts> facts;   // its text's facts: normalised text, fingerprint
  uint32_t oid = 0;          // an ALTER the hold snapshotted: the table, followed by OID
  std::string before_id;     // the before it completes, when the hold (or the DROP's) wrote it
};

// How transactions holding shape changes ended, for the session to act on. A change reaches
// `committed` only once the server has committed it: a rolled-back transaction, a savepoint rolled
// back to, a failed implicit block leave nothing.
struct ShapeOutcomes {
  std::vector<CompletedChange> committed;
  // PREPARE TRANSACTION: the changes wait for COMMIT PREPARED, which any session may send.
  std::vector<std::pair<std::string, std::vector<CompletedChange>>> prepared;
  std::vector<std::pair<std::string, bool>> finished_prepared;   // gid, committed (else rolled back)
  bool empty() const { return committed.empty() && prepared.empty() && finished_prepared.empty(); }
};

class TransactionTracker {
 public:
  // Shape changes followed per transaction at most (a transaction creating more gets afters for these).
  static constexpr size_t kMaxTransactionChanges = 10000;

  // Off by default: the prefilter then passes fewer texts (the decoder asks the classifier for
  // shape changes only when on).
  void enable(bool on) { enabled_ = on; }
  bool enabled() const { return enabled_; }
  // The session's user: the schema "$user" on its search_path names (a recreate's path).
  void set_user(std::string user) { user_ = std::move(user); }

  // A statement the server completed, the `path` it ran under, and what its hold snapshotted (null:
  // not held). Its shape changes join the open transaction's; its transaction control (savepoints,
  // PREPARE TRANSACTION and its end) decides what becomes of them.
  void completed(const parser::Statement& st, const std::shared_ptr<const parser::Facts>& facts,
                 const std::vector<HeldTable>* held, const parser::SearchPathTracker& path);
  // The open transaction ended: by its COMMIT or ROLLBACK tag, or back to idle.
  void ended(bool committed);

  bool has_shape_outcomes() const { return !outcomes_.empty(); }
  ShapeOutcomes take_shape_outcomes() { return std::exchange(outcomes_, {}); }
  // The gid of the PREPARE TRANSACTION that just ended the session's transaction: the outcomes of its
  // DROPs are known at COMMIT PREPARED / ROLLBACK PREPARED, in whatever session.
  std::optional<std::string> take_prepared_gid() { return std::exchange(prepared_gid_, std::nullopt); }
  // Changes not followed, past kMaxTransactionChanges in one transaction: they get no after.
  uint64_t changes_dropped() const { return changes_dropped_; }

  // The outcome checks of a hold's DROPs (its HoldEnd): what became of them is known once the
  // transaction ends, whether or not shape changes are followed. relay.cpp takes them at
  // ReadyForQuery back to idle, and parks them under a prepared transaction's gid.
  // Returns where they are, for failed_checks.
  struct ChecksAt {
    uint64_t taking = 0;   // take_outcome_checks calls before them
    uint32_t first = 0, count = 0;
  };
  ChecksAt await_end(std::vector<capture::PendingOutcome> checks) {
    ChecksAt at{takings_, static_cast<uint32_t>(outcome_checks_.size()), static_cast<uint32_t>(checks.size())};
    for (auto& c : checks) outcome_checks_.push_back(std::move(c));
    return at;
  }
  // The server refused the statement whose hold left these checks: its DROPs dropped nothing,
  // whatever the catalog shows at the transaction's end (another DROP of the table may have
  // quarantined it meanwhile). Checks already taken are left as they are.
  void failed_checks(const ChecksAt& at) {
    if (at.taking != takings_) return;
    for (uint32_t i = at.first; i < at.first + at.count && i < outcome_checks_.size(); ++i)
      outcome_checks_[i].statement_failed = true;
  }
  bool has_outcome_checks() const { return !outcome_checks_.empty(); }
  size_t outcome_check_count() const { return outcome_checks_.size(); }
  std::vector<capture::PendingOutcome> take_outcome_checks() {
    ++takings_;
    return std::exchange(outcome_checks_, {});
  }

 private:
  // A DROP this transaction ran, its table snapshotted by the hold; consumed_by: the index in
  // changes_ of the CREATE that recreated it (its after's pair).
  struct OpenDrop {
    HeldTable table;
    std::optional<size_t> consumed_by;
  };
  struct Mark {
    std::string name;       // the savepoint's
    size_t changes, drops;  // changes_ and dropped_ sizes when it was set
  };
  OpenDrop* find_open_drop(const parser::RelationName& name);
  void forget_open();

  bool enabled_ = false;
  std::string user_;
  std::vector<CompletedChange> changes_;   // completed in the open transaction
  std::vector<Mark> marks_;
  std::vector<OpenDrop> dropped_;
  // Those of earlier committed transactions not yet recreated by this session, newest last, one per
  // name, at most kRememberedDrops (a worker recreates the few tables it drops).
  static constexpr size_t kRememberedDrops = 16;
  std::vector<HeldTable> dropped_before_;
  ShapeOutcomes outcomes_;
  std::optional<std::string> prepared_gid_;
  uint64_t changes_dropped_ = 0;
  std::vector<capture::PendingOutcome> outcome_checks_;
  uint64_t takings_ = 0;
};

}  // namespace predrop::proxy
