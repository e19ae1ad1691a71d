// The protocol decoder: bytes of one session in, protocol events out. No socket, no policy.
//
// It frames messages with one table per direction (how much of each message must be buffered
// before it can be judged), reads the fields it needs with a bounds-checked reader, and keeps the
// session's protocol state as the server will have it: the replies the server owes and which
// message each answers, prepared statements and portals and what their text destroys, the
// transaction status, the COPY state, and the search_path, applied when the server confirms the
// statement that set it. What the server completed, and how each transaction ended, it feeds to
// the session's transaction tracker (transaction_tracker.hpp). The session (relay.cpp) owns the
// sockets, the buffers and backpressure and asks the decoder what each message means; the hold
// (hold.hpp) decides what to do about it.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "parser/parser.hpp"
#include "quarantine/substitute.hpp"
#include "proxy/transaction_tracker.hpp"

namespace predrop::proxy {

struct StandIn;

// How much of a message the decoder must see before the relay may pass it on.
enum class Need : uint8_t {
  header,     // the 5-byte header: the body streams through unexamined (DataRow, CopyData, …)
  whole,      // the whole message up to 64 KiB (the small server messages predrop reads); longer: streamed
  inspected,  // the whole message up to limits.max_inspect_bytes; a longer one streams through, counted
  names,      // as inspected, but a longer one is judged on its first max_inspect_bytes, where its names
              // are (a Bind carrying large parameters), and the rest streams through
};

struct MessageSpec {
  const char* name = nullptr;   // nullptr: not a message of this direction (still relayed: the server judges it)
  Need need = Need::header;
};
using MessageTable = std::array<MessageSpec, 256>;
const MessageTable& frontend_table();
const MessageTable& backend_table();

struct FrameLimits {
  uint64_t max_message_bytes = 1ull << 30;
  uint64_t max_inspect_bytes = 1u << 20;
};

// The decision for the message at the head of a direction's undecided bytes.
struct Frame {
  enum class Kind : uint8_t {
    incomplete,   // fewer bytes than `need` are buffered
    judge,        // `need` == total bytes are buffered: hand the whole message to the decoder
    stream,       // pass it on as it arrives; the decoder is told its type and length only
    bad_length,   // the length word is below 4 or above max_message_bytes: the stream is lost
  };
  Kind kind = Kind::incomplete;
  char type = 0;
  uint32_t length = 0;          // the length word
  uint64_t total = 0;           // length + the type byte
  uint64_t need = 0;            // bytes that must be buffered before the relay may act
  bool over_inspect_limit = false;   // an inspected message too long to inspect: streamed, counted
  bool prefix = false;               // judge: only the first `need` bytes are judged, the rest streams
};
Frame frame_message(const MessageTable& table, const char* data, size_t avail, const FrameLimits& limits);

// Reads a message body field by field. Every read checks the bytes are there; a failed read
// leaves the reader failed, and every later read fails too, so a caller checks once at the end.
class MessageReader {
 public:
  MessageReader(const char* body, size_t len) : p_(body), end_(body + len) {}
  // A NUL-terminated string; fails when no NUL comes before the end (never reads as "").
  std::string_view cstring();
  char byte();
  int16_t int16();
  int32_t int32();
  bool ok() const { return ok_; }
  size_t remaining() const { return ok_ ? static_cast<size_t>(end_ - p_) : 0; }

 private:
  const char* p_;
  const char* end_;
  bool ok_ = true;
};

// A statement predrop runs in the client's place is the quarantine's (quarantine/substitute.hpp):
// the decoder only keeps, per owed entry, which replies belong to the client.
using quarantine::Substitute;
using quarantine::Substitutes;
using quarantine::kSubstituteTrialState;
using quarantine::kSubstituteWarningState;

// The replies the server owes, oldest first. Each entry is one frontend message that the server
// answers (or, for Sync, Query and FunctionCall, a ReadyForQuery it ends with).
struct OwedReply {
  // copy_end marks where the client ended a COPY IN (CopyDone or CopyFail) before the server
  // had said it began: the Syncs before it are ones the server ignores (see on_backend 'G').
  enum class Kind : uint8_t { parse, bind, describe, execute, close, sync, query, function_call, copy_end };
  Kind kind;
  bool injected = false;     // predrop sent it: its reply is predrop's to swallow
  bool refusal = false;      // predrop's stand-in for a refused statement: its error reaches the client
  bool failed = false;       // query / function_call: an ErrorResponse came before its ReadyForQuery
  uint16_t completed = 0;    // query: statements of its text the server has completed
  // Every member has an initializer, so an entry names only what it sets ({.kind = …, .facts = …}).
  std::shared_ptr<const parser::Facts> facts{};   // query / execute: applied as the server completes them
  std::string deferred_name{};                  // parse: a statement name bound only at ParseComplete
  std::shared_ptr<const parser::Facts> previous{};   // parse, deferred: what the name meant before
  std::shared_ptr<const std::vector<HeldTable>> held{};   // query / execute: what its hold snapshotted
  std::shared_ptr<const Substitutes> substitutes{};      // query / execute: statements predrop replaced
  TransactionTracker::ChecksAt checks{};   // query / execute: its hold's outcome checks, in the tracker
};

// A queue with a moving head, compacted as it goes so that a long pipeline never grows it
// past what is really owed. An idle session holds nothing on the heap.
class OwedReplies {
 public:
  bool empty() const { return head_ == q_.size(); }
  size_t size() const { return q_.size() - head_; }
  OwedReply& front() { return q_[head_]; }
  OwedReply& back() { return q_.back(); }
  OwedReply& at(size_t i) { return q_[head_ + i]; }
  const OwedReply& at(size_t i) const { return q_[head_ + i]; }
  void push_back(OwedReply r) { q_.push_back(std::move(r)); }
  void pop_back() { q_.pop_back(); if (empty()) clear(); }
  void pop_front();
  void clear() {
    // A long pipeline's slots are given back once it drains: an idle session keeps only a few.
    if (q_.capacity() > 16) std::vector<OwedReply>().swap(q_);
    else q_.clear();
    head_ = 0;
  }
  size_t capacity_in_use() const { return q_.size(); }   // tests: the compaction bound

 private:
  std::vector<OwedReply> q_;
  size_t head_ = 0;
};

// What one frontend message means.
struct FrontendEvent {
  enum class Kind : uint8_t {
    relay,        // nothing to decide
    statement,    // a Query or an Execute of a statement that may matter: `facts` says what it does
    malformed,    // a message predrop must read does not hold together: `error` says why
  };
  Kind kind = Kind::relay;
  char type = 0;
  std::shared_ptr<const parser::Facts> facts;
  std::string error;
  bool uninspected = false;   // judged on a prefix, and what it says could not all be read there
};

// What one backend message means.
struct BackendEvent {
  enum class Kind : uint8_t { relay, swallow, malformed };
  Kind kind = Kind::relay;
  bool backend_key = false;       // BackendKeyData: `key` is the cancel key
  bool ready = false;             // ReadyForQuery: `status`, and whether a transaction just ended
  bool transaction_ended = false;
  bool committed = false;
  bool sasl_offer = false;        // AuthenticationSASL: the mechanism list
  bool refusal_error = false;     // the ErrorResponse answering predrop's stand-in for a refused statement
  bool desync = false;            // a reply that matches no owed entry (counted; the relay goes on)
  // A CommandComplete, ErrorResponse or NoticeResponse of a substitute: the relay gives the client
  // the statement's tag, or the message less the substitute's context line.
  const Substitute* substitute = nullptr;
  std::shared_ptr<const Substitutes> substitute_owner;   // keeps `substitute` alive once its entry is answered
  std::string substitute_warning;   // the substitute's own warning to predrop (swallowed): why it fell back
  char status = 0;
  std::string key;
  std::string error;
};

struct DecoderStats {
  uint64_t frontend_messages = 0, backend_messages = 0;
  uint64_t malformed = 0, desync = 0, uninspected = 0;
};

// How one statement the server ran moves the search_path and the transaction block state
// (`path` null: only `in_block` moves). Shared by the decoder and the hold, which walks the
// statements of the message it holds.
void apply_statement(parser::SearchPathTracker* path, const parser::Statement& st, bool& in_block, char txn_status);

class Decoder {
 public:
  // initial_role: the role the startup's options set (-c role=…), if any.
  Decoder(parser::Classifier& classifier, std::vector<std::string> initial_search_path,
          std::optional<std::string> initial_role = std::nullopt);

  // A message the frame said to judge: `msg` is the whole message, header included, or for a
  // Need::names message longer than the inspection limit its first bytes (`total` says how many in all).
  FrontendEvent on_frontend(std::string_view msg, uint64_t total);
  // A message the frame said to stream: only its type and length are known.
  void on_frontend_streamed(char type, uint64_t total, bool over_inspect_limit);
  BackendEvent on_backend(std::string_view msg);
  void on_backend_streamed(char type, uint64_t total);

  // The statement at the back of the owed queue (the one just judged) does not reach the server:
  // `stand_in` (proxy/stand_in.hpp) goes in its place, and what the client is owed follows it. A
  // refusal answers in the statement's place; a substitute's replies are made the client's (a Query
  // keeps its entry, the new text having as many statements). In the extended protocol the stand-in's
  // own ParseComplete and BindComplete are swallowed.
  void stand_in_for_last(const StandIn& stand_in);
  // The session's search_path as the server will have it once every owed reply has arrived
  // without error: what a statement judged now runs under.
  parser::SearchPathTracker search_path_ahead() const;
  // As the server last reported it (ParameterStatus); on until it says otherwise.
  bool standard_conforming_strings() const { return standard_conforming_strings_; }
  const parser::SearchPathTracker& search_path() const { return search_path_; }

  char transaction_status() const { return txn_status_; }
  bool replies_owed() const { return !owed_.empty(); }
  bool copy_in() const { return copy_in_; }     // client → server data phase
  bool copy_out() const { return copy_out_; }   // server → client data phase
  const DecoderStats& stats() const { return stats_; }
  const OwedReplies& owed() const { return owed_; }
  size_t statement_count() const { return statements_.size(); }

  // The server keys statements and portals on the first NAMEDATALEN-1 bytes of their names.
  static std::string name_key(std::string_view name);

  // The transactions the decoder follows for the session (shape changes, savepoints, 2PC): the
  // session turns shape tracking on and reads what ended there.
  TransactionTracker& transactions() { return transactions_; }
  const TransactionTracker& transactions() const { return transactions_; }
  bool tracks_shape_changes() const { return transactions_.enabled(); }
  // The statement just judged (the back of the owed queue) was held and these tables snapshotted.
  void note_held(std::vector<HeldTable> tables);
  // Its hold's outcome checks, for the transaction's end; an error in its place marks them failed.
  void note_outcome_checks(std::vector<capture::PendingOutcome> checks);

 private:
  FrontendEvent statement_event(char type, std::shared_ptr<const parser::Facts> facts);
  void apply_completed(OwedReply& entry);
  bool runs_in_block(const OwedReply& entry) const;
  void skip_to_sync();
  void account_reply(char type, BackendEvent& ev);
  void account_error(BackendEvent& ev);
  void forget_unnamed();
  void copy_in_began();
  // The substitute now running at the head of the owed queue (null: none); `owner` keeps it alive.
  void inject_unnamed_before(OwedReply execute);
  void replace_last_with_refusal();
  void substitute_last(std::shared_ptr<const Substitutes> substitutes);
  const Substitute* running_substitute(std::shared_ptr<const Substitutes>& owner) const;

  parser::Classifier& classifier_;
  bool standard_conforming_strings_ = true;
  parser::SearchPathTracker search_path_;
  OwedReplies owed_;
  // Prepared statements and portals by name key → what their text does (nullptr: nothing predrop
  // acts on). Every named statement is kept, harmless ones too: the server refuses a Parse of a
  // name it already has, and predrop must know that name is taken.
  std::unordered_map<std::string, std::shared_ptr<const parser::Facts>> statements_;
  std::unordered_map<std::string, std::shared_ptr<const parser::Facts>> portals_;
  char txn_status_ = 'I';
  bool txn_tag_commit_ = false;     // the last COMMIT/ROLLBACK tag before ReadyForQuery said COMMIT
  bool txn_tag_seen_ = false;
  bool error_since_ready_ = false;
  bool copy_in_ = false, copy_out_ = false;
  bool ignoring_syncs_ = false;     // in a COPY IN: the client's Syncs until its CopyDone/CopyFail owe nothing
  DecoderStats stats_;
  TransactionTracker transactions_;
};

}  // namespace predrop::proxy
