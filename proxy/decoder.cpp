#include "proxy/decoder.hpp"

#include <cstring>

#include "proxy/stand_in.hpp"
#include "proxy/wire.hpp"

namespace predrop::proxy {

namespace {

// The server's NAMEDATALEN: statement and portal hash tables compare the first 63 bytes of a name.
constexpr size_t kNameKeyBytes = 63;

struct TableRow {
  char type;
  const char* name;
  Need need;
};

template <size_t N>
constexpr MessageTable make_table(const TableRow (&rows)[N]) {
  MessageTable t{};
  for (const TableRow& r : rows) t[static_cast<unsigned char>(r.type)] = {r.name, r.need};
  return t;
}

constexpr TableRow kFrontendRows[] = {
    {'Q', "Query", Need::inspected},
    {'P', "Parse", Need::names},
    {'B', "Bind", Need::names},
    {'E', "Execute", Need::inspected},
    {'C', "Close", Need::inspected},
    {'D', "Describe", Need::header},
    {'S', "Sync", Need::header},
    {'H', "Flush", Need::header},
    {'F', "FunctionCall", Need::header},
    {'X', "Terminate", Need::header},
    {'d', "CopyData", Need::header},
    {'c', "CopyDone", Need::header},
    {'f', "CopyFail", Need::header},
    {'p', "PasswordMessage", Need::header},   // also SASLInitialResponse, SASLResponse, GSSResponse
};

constexpr TableRow kBackendRows[] = {
    {'R', "Authentication", Need::whole},
    {'K', "BackendKeyData", Need::whole},
    {'S', "ParameterStatus", Need::whole},   // standard_conforming_strings changes how text is lexed
    {'Z', "ReadyForQuery", Need::whole},
    {'C', "CommandComplete", Need::whole},
    {'E', "ErrorResponse", Need::whole},
    {'N', "NoticeResponse", Need::whole},      // a substitute's: its context line is predrop's
    {'A', "NotificationResponse", Need::header},
    // Whole (5 bytes): the ones answering predrop's own Parse and Bind are removed.
    {'1', "ParseComplete", Need::whole},
    {'2', "BindComplete", Need::whole},
    {'3', "CloseComplete", Need::header},
    {'t', "ParameterDescription", Need::header},
    {'T', "RowDescription", Need::header},
    {'n', "NoData", Need::header},
    {'D', "DataRow", Need::header},
    {'I', "EmptyQueryResponse", Need::header},
    {'s', "PortalSuspended", Need::header},
    {'V', "FunctionCallResponse", Need::header},
    {'G', "CopyInResponse", Need::header},
    {'H', "CopyOutResponse", Need::header},
    {'W', "CopyBothResponse", Need::header},
    {'d', "CopyData", Need::header},
    {'c', "CopyDone", Need::header},
    {'v', "NegotiateProtocolVersion", Need::header},
};

constexpr MessageTable kFrontend = make_table(kFrontendRows);
constexpr MessageTable kBackend = make_table(kBackendRows);

// The messages read whole (server messages only) are small by nature; an ErrorResponse or a SASL
// offer longer than this is not one a server sends, and is streamed rather than buffered.
constexpr uint64_t kWholeLimit = 64 * 1024;

}  // namespace

const MessageTable& frontend_table() { return kFrontend; }
const MessageTable& backend_table() { return kBackend; }

Frame frame_message(const MessageTable& table, const char* data, size_t avail, const FrameLimits& limits) {
  Frame f;
  if (avail < wire::kHeaderLen) {
    f.need = wire::kHeaderLen;
    return f;
  }
  f.type = data[0];
  f.length = wire::read_u32(data + 1);
  if (f.length < 4 || f.length > limits.max_message_bytes) {
    f.kind = Frame::Kind::bad_length;
    return f;
  }
  f.total = static_cast<uint64_t>(f.length) + 1;
  Need need = table[static_cast<unsigned char>(f.type)].need;
  uint64_t limit = need == Need::whole ? kWholeLimit : limits.max_inspect_bytes;
  if (need == Need::names && f.total > limit) {
    f.over_inspect_limit = f.prefix = true;
    f.need = limit;
    f.kind = avail >= f.need ? Frame::Kind::judge : Frame::Kind::incomplete;
    return f;
  }
  if (need == Need::header || f.total > limit) {
    f.over_inspect_limit = need == Need::inspected;
    f.kind = Frame::Kind::stream;
    f.need = wire::kHeaderLen;
    return f;
  }
  f.need = f.total;
  f.kind = avail >= f.total ? Frame::Kind::judge : Frame::Kind::incomplete;
  return f;
}

std::string_view MessageReader::cstring() {
  if (!ok_) return {};
  const void* nul = std::memchr(p_, '\0', static_cast<size_t>(end_ - p_));
  if (!nul) {
    ok_ = false;
    return {};
  }
  std::string_view s(p_, static_cast<const char*>(nul) - p_);
  p_ += s.size() + 1;
  return s;
}

char MessageReader::byte() {
  if (!ok_ || p_ == end_) {
    ok_ = false;
    return 0;
  }
  return *p_++;
}

int16_t MessageReader::int16() {
  if (!ok_ || end_ - p_ < 2) {
    ok_ = false;
    return 0;
  }
  uint16_t v = static_cast<uint16_t>((static_cast<unsigned char>(p_[0]) << 8) | static_cast<unsigned char>(p_[1]));
  p_ += 2;
  return static_cast<int16_t>(v);
}

int32_t MessageReader::int32() {
  if (!ok_ || end_ - p_ < 4) {
    ok_ = false;
    return 0;
  }
  uint32_t v = wire::read_u32(p_);
  p_ += 4;
  return static_cast<int32_t>(v);
}

void OwedReplies::pop_front() {
  q_[head_] = OwedReply{};   // release its facts now, not at compaction
  if (++head_ == q_.size()) return clear();
  // A CopyDone or CopyFail is only ever owed behind the statement that began its COPY: once that
  // statement is answered, a marker left at the front ended a COPY that never began (the server
  // ignores CopyData, CopyDone and CopyFail outside COPY mode).
  while (q_[head_].kind == OwedReply::Kind::copy_end) {
    q_[head_] = OwedReply{};
    if (++head_ == q_.size()) return clear();
  }
  // A pipeline that never drains (a client streaming simple Queries) must not grow the queue.
  if (head_ >= 64 && head_ * 2 >= q_.size()) {
    q_.erase(q_.begin(), q_.begin() + static_cast<ptrdiff_t>(head_));
    head_ = 0;
  }
}

Decoder::Decoder(parser::Classifier& classifier, std::vector<std::string> initial_search_path,
                 std::optional<std::string> initial_role)
    : classifier_(classifier), search_path_(std::move(initial_search_path), std::move(initial_role)) {}

std::string Decoder::name_key(std::string_view name) {
  return std::string(name.substr(0, kNameKeyBytes));
}

FrontendEvent Decoder::statement_event(char type, std::shared_ptr<const parser::Facts> facts) {
  FrontendEvent ev;
  ev.type = type;
  if (facts) {
    ev.kind = FrontendEvent::Kind::statement;
    ev.facts = std::move(facts);
  }
  return ev;
}

FrontendEvent Decoder::on_frontend(std::string_view msg, uint64_t total) {
  ++stats_.frontend_messages;
  bool whole = msg.size() == total;
  char type = msg[0];
  MessageReader r(msg.data() + wire::kHeaderLen, msg.size() - wire::kHeaderLen);
  auto malformed = [&](std::string why) {
    ++stats_.malformed;
    FrontendEvent ev;
    ev.kind = FrontendEvent::Kind::malformed;
    ev.type = type;
    ev.error = std::move(why);
    return ev;
  };
  using K = OwedReply::Kind;
  switch (type) {
    case 'Q': {
      std::string_view sql = r.cstring();
      if (!r.ok()) return malformed("invalid Query message: the query string is not terminated");
      forget_unnamed();
      auto facts = classifier_.classify(sql, standard_conforming_strings_, transactions_.enabled());
      owed_.push_back({.kind = K::query, .facts = facts});
      return statement_event('Q', std::move(facts));
    }
    case 'P': {
      FrontendEvent ev;
      ev.type = 'P';
      std::string_view name = r.cstring();
      bool name_read = r.ok();
      std::string_view sql = r.cstring();
      if (!r.ok() && whole) return malformed("invalid Parse message: the statement name or query string is not terminated");
      std::shared_ptr<const parser::Facts> facts;
      if (!name_read)
        // A name longer than the inspection limit is no name a client really sends, and one that
        // cannot be read cannot be followed: refused rather than guessed at.
        return malformed("Parse message: the statement name is longer than limits.max_inspect_bytes");
      if (r.ok()) {
        facts = classifier_.classify(sql, standard_conforming_strings_, transactions_.enabled());
      } else {
        // The text runs past the inspection limit: the name is known, what it does is not.
        ++stats_.uninspected;
        ev.uninspected = true;
      }
      std::string key = name_key(name);
      OwedReply entry{.kind = K::parse};
      auto it = statements_.find(key);
      if (!key.empty() && it != statements_.end() && it->second && it->second->destroys()) {
        // The server refuses a Parse of a name it has (42P05) unless the name was deallocated by
        // SQL meanwhile (DEALLOCATE, DISCARD ALL), which predrop does not follow. Until its
        // ParseComplete says which, the name means both texts (what either destroys is held).
        entry.previous = it->second;
        entry.facts = facts;
        entry.deferred_name = key;
        if (facts && facts->destroys()) {
          auto both = std::make_shared<parser::Facts>(*facts);
          both->statements.insert(both->statements.end(), entry.previous->statements.begin(), entry.previous->statements.end());
          it->second = std::move(both);
        }
        owed_.push_back(std::move(entry));
        return ev;
      }
      statements_[std::move(key)] = std::move(facts);
      owed_.push_back(std::move(entry));
      return ev;
    }
    case 'B': {
      std::string_view portal = r.cstring();
      std::string_view stmt = r.cstring();
      if (!r.ok() && !whole)
        // Names longer than the inspection limit: not names a client really sends, and a portal
        // that cannot be followed could run a DROP unseen. Refused rather than guessed at.
        return malformed("Bind message: the portal and statement names are longer than limits.max_inspect_bytes");
      if (!r.ok()) return malformed("invalid Bind message: the portal or statement name is not terminated");
      auto it = statements_.find(name_key(stmt));
      std::shared_ptr<const parser::Facts> facts = it != statements_.end() ? it->second : nullptr;
      if (facts) portals_[name_key(portal)] = std::move(facts);
      else portals_.erase(name_key(portal));
      owed_.push_back({.kind = K::bind});
      FrontendEvent ev;
      ev.type = 'B';
      return ev;
    }
    case 'E': {
      std::string_view portal = r.cstring();
      r.int32();
      if (!r.ok()) return malformed("invalid Execute message: the portal name is not terminated");
      auto it = portals_.find(name_key(portal));
      std::shared_ptr<const parser::Facts> facts = it != portals_.end() ? it->second : nullptr;
      owed_.push_back({.kind = K::execute, .facts = facts});
      return statement_event('E', std::move(facts));
    }
    case 'C': {
      char what = r.byte();
      std::string_view name = r.cstring();
      if (!r.ok() || (what != 'S' && what != 'P'))
        return malformed("invalid Close message: expected 'S' or 'P' and a terminated name");
      if (what == 'S') statements_.erase(name_key(name));
      else portals_.erase(name_key(name));
      owed_.push_back({.kind = K::close});
      FrontendEvent ev;
      ev.type = 'C';
      return ev;
    }
    default:
      // Only messages the table judges reach here; the rest are on_frontend_streamed.
      return {};
  }
}

void Decoder::forget_unnamed() {
  // A simple Query replaces the unnamed statement and portal.
  statements_.erase(std::string());
  portals_.erase(std::string());
}

void Decoder::on_frontend_streamed(char type, uint64_t total, bool over_inspect_limit) {
  ++stats_.frontend_messages;
  using K = OwedReply::Kind;
  if (over_inspect_limit) ++stats_.uninspected;
  auto owe = [this](K k) { owed_.push_back({.kind = k}); };
  switch (type) {
    case 'Q': forget_unnamed(); owe(K::query); break;
    case 'E': owe(K::execute); break;
    case 'C': owe(K::close); break;
    case 'D': owe(K::describe); break;
    case 'F': owe(K::function_call); break;
    case 'S':
      // The server ignores a Sync received in COPY IN mode.
      if (!ignoring_syncs_) owe(K::sync);
      break;
    case 'c':
    case 'f':
      copy_in_ = false;
      if (ignoring_syncs_) ignoring_syncs_ = false;
      else if (!owed_.empty()) owe(K::copy_end);   // sent before the server's CopyInResponse arrived
      break;
    default: break;
  }
}

// The statement at the back of the owed queue goes as Parse + Bind + Execute of the unnamed
// statement and portal (proxy/stand_in.cpp): their ParseComplete and BindComplete are
// predrop's, swallowed, and `execute` answers in the client's Execute's place.
void Decoder::inject_unnamed_before(OwedReply execute) {
  using K = OwedReply::Kind;
  OwedReply parse{K::parse};
  parse.injected = true;
  OwedReply bind{K::bind};
  bind.injected = true;
  owed_.push_back(std::move(parse));
  owed_.push_back(std::move(bind));
  owed_.push_back(std::move(execute));
  statements_.erase(std::string());
  portals_.erase(std::string());
}

void Decoder::stand_in_for_last(const StandIn& stand_in) {
  switch (stand_in.kind) {
    case StandIn::Kind::refusal: return replace_last_with_refusal();
    case StandIn::Kind::substitute: return substitute_last(stand_in.substitutes);
  }
}

void Decoder::replace_last_with_refusal() {
  using K = OwedReply::Kind;
  if (owed_.empty()) return;
  OwedReply refusal{owed_.back().kind == K::query ? K::query : K::execute};
  refusal.injected = refusal.refusal = true;
  owed_.pop_back();
  if (refusal.kind == K::query) return owed_.push_back(std::move(refusal));
  inject_unnamed_before(std::move(refusal));
}

void Decoder::substitute_last(std::shared_ptr<const Substitutes> substitutes) {
  using K = OwedReply::Kind;
  if (owed_.empty() || !substitutes || substitutes->empty()) return;
  if (owed_.back().kind == K::query) {
    owed_.back().substitutes = std::move(substitutes);
    return;
  }
  OwedReply execute = std::move(owed_.back());
  owed_.pop_back();
  execute.substitutes = std::move(substitutes);
  inject_unnamed_before(std::move(execute));
}

const Substitute* Decoder::running_substitute(std::shared_ptr<const Substitutes>& owner) const {
  using K = OwedReply::Kind;
  if (owed_.empty()) return nullptr;
  const OwedReply& e = owed_.at(0);
  if (!e.substitutes || (e.kind != K::query && e.kind != K::execute)) return nullptr;
  const uint16_t k = e.kind == K::query ? e.completed : 0;
  for (const auto& s : *e.substitutes)
    if (s.index == k) {
      owner = e.substitutes;
      return &s;
    }
  return nullptr;
}

// How one statement the server completed moves the search_path and the role "$user" names (path
// null: only the block state moves). A multi-statement Query runs as one implicit transaction
// block, so its SET LOCAL holds to its end; a COMMIT or ROLLBACK in the text ends the block the
// text itself opened.
void apply_statement(parser::SearchPathTracker* path, const parser::Statement& st, bool& in_block, char txn_status) {
  using T = parser::TxnControl;
  if (st.txn == T::begin) in_block = true;
  if (path) {
    if (st.search_path) path->apply(*st.search_path, in_block);
    if (st.session_authorization) path->apply_session_authorization(*st.session_authorization, in_block);
    if (st.role) path->apply_role(*st.role, in_block);
    if (st.txn == T::savepoint) path->savepoint(st.savepoint);
    if (st.txn == T::release) path->release_savepoint(st.savepoint);
    if (st.txn == T::rollback_to) path->rollback_to_savepoint(st.savepoint);
  }
  if (st.txn == T::commit || st.txn == T::rollback) {
    if (path && in_block && txn_status == 'I') path->end_transaction(st.txn == T::commit);
    in_block = false;
  }
}

// Whether the statements of an entry run inside a transaction block: an explicit one, the implicit
// block of a multi-statement Query, or the implicit block of an extended-protocol segment, which
// lasts to its Sync (so a SET LOCAL holds for the Executes after it, and an error rolls a SET back).
bool Decoder::runs_in_block(const OwedReply& entry) const {
  return txn_status_ != 'I' || entry.kind == OwedReply::Kind::execute || (entry.facts && entry.facts->statements.size() > 1);
}

void Decoder::apply_completed(OwedReply& entry) {
  size_t k = entry.completed++;
  if (!entry.facts) return;
  const auto& sts = entry.facts->statements;
  if (k >= sts.size()) return;
  if (transactions_.enabled()) transactions_.completed(sts[k], entry.facts, entry.held.get(), search_path_);
  if (!entry.facts->touches_search_path()) return;
  // The statements before it, already applied, only move the block state.
  bool in_block = runs_in_block(entry);
  for (size_t i = 0; i < k; ++i) apply_statement(nullptr, sts[i], in_block, txn_status_);
  apply_statement(&search_path_, sts[k], in_block, txn_status_);
}

// The tracker hears of a statement after search_path moved for the statements before it, so a
// change carries the path it ran under; what its hold snapshotted rides on its owed entry.
void Decoder::note_held(std::vector<HeldTable> tables) {
  if (!transactions_.enabled() || owed_.empty() || tables.empty()) return;
  owed_.back().held = std::make_shared<const std::vector<HeldTable>>(std::move(tables));
}

void Decoder::note_outcome_checks(std::vector<capture::PendingOutcome> checks) {
  if (checks.empty()) return;
  const auto at = transactions_.await_end(std::move(checks));
  if (!owed_.empty()) owed_.back().checks = at;
}

parser::SearchPathTracker Decoder::search_path_ahead() const {
  parser::SearchPathTracker path = search_path_;
  // Every owed entry but the last (the statement being judged, whose own SETs the hold walks),
  // from the first of its statements the server has not completed yet.
  size_t n = owed_.size();
  for (size_t i = 0; i + 1 < n; ++i) {
    const OwedReply& e = owed_.at(i);
    if (e.kind != OwedReply::Kind::query && e.kind != OwedReply::Kind::execute) continue;   // a Parse runs nothing
    if (!e.facts || !e.facts->touches_search_path()) continue;
    const auto& sts = e.facts->statements;
    bool in_block = runs_in_block(e);
    for (size_t k = 0; k < sts.size(); ++k) apply_statement(k < e.completed ? nullptr : &path, sts[k], in_block, txn_status_);
  }
  return path;
}

// After an error in the extended protocol the server discards every message up to the next Sync.
void Decoder::skip_to_sync() {
  while (!owed_.empty() && owed_.front().kind != OwedReply::Kind::sync) {
    OwedReply& e = owed_.front();
    // A Parse that failed, or never ran: the name keeps what it meant before.
    if (!e.deferred_name.empty()) statements_[e.deferred_name] = e.previous;
    // An Execute that failed, or never ran: its DROPs dropped nothing.
    if (e.checks.count > 0) transactions_.failed_checks(e.checks);
    owed_.pop_front();
  }
}

// CopyInResponse: the server now ignores every Sync (and Flush) until the client's CopyDone or
// CopyFail. Syncs the client sent after the statement that began the COPY, before ending it, were
// queued as owed: they are not.
void Decoder::copy_in_began() {
  copy_in_ = true;
  using K = OwedReply::Kind;
  if (owed_.empty()) return;
  std::vector<OwedReply> kept;
  size_t i = 1;
  bool ended = false;
  for (; i < owed_.size(); ++i) {
    OwedReply& e = owed_.at(i);
    if (e.kind == K::copy_end) {
      ended = true;
      ++i;
      break;
    }
    if (e.kind != K::sync) kept.push_back(std::move(e));
  }
  for (; i < owed_.size(); ++i) kept.push_back(std::move(owed_.at(i)));
  OwedReply head = std::move(owed_.front());
  owed_.clear();
  owed_.push_back(std::move(head));
  for (auto& e : kept) owed_.push_back(std::move(e));
  ignoring_syncs_ = !ended;
}

void Decoder::on_backend_streamed(char type, uint64_t total) {
  ++stats_.backend_messages;
  BackendEvent ev;
  account_reply(type, ev);
}

// What a server message answers of the owed queue, for every message judged or streamed.
void Decoder::account_reply(char type, BackendEvent& ev) {
  using K = OwedReply::Kind;
  auto front_is = [this](K k) { return !owed_.empty() && owed_.front().kind == k; };
  switch (type) {
    case '1':
    case '2': {
      if (!front_is(type == '1' ? K::parse : K::bind)) {
        ++stats_.desync;
        ev.desync = true;
        return;
      }
      OwedReply& e = owed_.front();
      if (!e.deferred_name.empty()) statements_[e.deferred_name] = e.facts;   // the name was free after all
      if (e.injected) ev.kind = BackendEvent::Kind::swallow;
      owed_.pop_front();
      return;
    }
    case '3':
    case 'n':
      if (front_is(type == '3' ? K::close : K::describe)) owed_.pop_front();
      else ++stats_.desync, ev.desync = true;
      return;
    case 'T':
      // A RowDescription answers a Describe, or heads the rows of a simple Query.
      if (front_is(K::describe)) owed_.pop_front();
      return;
    case 'I':
    case 's':
      if (front_is(K::execute)) owed_.pop_front();
      else if (front_is(K::query)) ++owed_.front().completed;
      return;
    case 'G': copy_in_began(); return;
    case 'E': account_error(ev); return;
    case 'H': copy_out_ = true; return;
    case 'c': copy_out_ = false; return;
    default: return;
  }
}

void Decoder::account_error(BackendEvent& ev) {
  using K = OwedReply::Kind;
  error_since_ready_ = true;
  copy_in_ = copy_out_ = false;
  ignoring_syncs_ = false;
  if (owed_.empty()) return;   // a FATAL, or an error outside any cycle: it answers nothing owed
  OwedReply& e = owed_.front();
  ev.refusal_error = e.refusal;
  // The held statement failed: its DROPs dropped nothing (an Execute's, with those the server
  // skips after it: skip_to_sync). In a Query of several statements, only when none had completed
  // (one that did may have committed what came before the error).
  if (e.checks.count > 0 && e.kind == K::query && e.completed == 0) transactions_.failed_checks(e.checks);
  if (e.kind == K::query || e.kind == K::function_call) {
    e.failed = true;
    return;
  }
  skip_to_sync();
}

BackendEvent Decoder::on_backend(std::string_view msg) {
  char type = msg[0];
  BackendEvent ev;
  using K = OwedReply::Kind;
  ++stats_.backend_messages;
  const char* body = msg.data() + wire::kHeaderLen;
  size_t blen = msg.size() - wire::kHeaderLen;
  MessageReader r(body, blen);
  auto malformed = [&](std::string why) {
    ++stats_.malformed;
    ev.kind = BackendEvent::Kind::malformed;
    ev.error = std::move(why);
    return ev;
  };
  switch (type) {
    case 'R': {
      int32_t code = r.int32();
      if (!r.ok()) return malformed("Authentication message without its code");
      ev.sasl_offer = code == 10;
      return ev;
    }
    case 'S': {
      std::string_view name = r.cstring();
      std::string_view value = r.cstring();
      if (!r.ok()) return malformed("ParameterStatus without a terminated name and value");
      // The server reports the setting at startup and after every change (it is GUC_REPORT), and
      // lexes each Query and Parse with the value reported last: a SET in the same Query string
      // cannot change how that string was lexed, since the server parses a string whole first.
      if (name == "standard_conforming_strings") standard_conforming_strings_ = value != "off";
      return ev;
    }
    case 'K':
      if (blen < 8) return malformed("BackendKeyData shorter than 8 bytes");
      ev.backend_key = true;
      ev.key.assign(body, blen);
      return ev;
    case 'C': {
      std::string_view tag = r.cstring();
      if (!r.ok()) return malformed("CommandComplete without a terminated tag");
      if (tag == "COMMIT" || tag == "PREPARE TRANSACTION") txn_tag_seen_ = txn_tag_commit_ = true;
      else if (tag == "ROLLBACK") txn_tag_seen_ = true, txn_tag_commit_ = false;
      copy_in_ = copy_out_ = false;
      if (owed_.empty()) {
        ++stats_.desync;
        ev.desync = true;
        return ev;
      }
      OwedReply& e = owed_.front();
      if (e.kind == K::execute || e.kind == K::query) {
        if (e.kind == K::execute) e.completed = 0;
        ev.substitute = running_substitute(ev.substitute_owner);
        const size_t k = e.completed;
        apply_completed(e);
        if (transactions_.enabled()) {
          // What a COMMIT commits is committed now, whatever fails after it before ReadyForQuery (a
          // pipeline segment goes on to its Sync). ROLLBACK TO says ROLLBACK too: its facts tell.
          const bool rollback_to = e.facts && k < e.facts->statements.size() &&
                                   e.facts->statements[k].txn == parser::TxnControl::rollback_to;
          if (tag == "COMMIT") transactions_.ended(true);
          else if (tag == "ROLLBACK" && !rollback_to) transactions_.ended(false);
        }
        if (e.kind == K::execute) owed_.pop_front();
      } else {
        ++stats_.desync;
        ev.desync = true;
      }
      return ev;
    }
    case 'E':
      ev.substitute = running_substitute(ev.substitute_owner);
      account_error(ev);
      return ev;
    case 'N':
      if ((ev.substitute = running_substitute(ev.substitute_owner))) {
        wire::ErrorFields f = wire::parse_error_fields(body, blen);
        if (f.sqlstate == kSubstituteWarningState) {
          ev.kind = BackendEvent::Kind::swallow;
          ev.substitute_warning = f.message.empty() ? "the substitute could not keep the table" : f.message;
          ev.substitute = nullptr;
        }
      }
      return ev;
    case 'Z': {
      char status = r.byte();
      if (!r.ok() || (status != 'I' && status != 'T' && status != 'E')) return malformed("ReadyForQuery with an invalid status");
      copy_in_ = copy_out_ = false;
      // It answers the oldest Sync, Query or FunctionCall; anything owed before it went unanswered.
      while (!owed_.empty() && owed_.front().kind != K::sync && owed_.front().kind != K::query &&
             owed_.front().kind != K::function_call) {
        // A CopyDone or CopyFail the server ignored (its COPY had failed first) owes nothing.
        if (owed_.front().kind != K::copy_end) {
          ++stats_.desync;
          ev.desync = true;
        }
        owed_.pop_front();
      }
      if (!owed_.empty()) owed_.pop_front();
      char before = txn_status_;
      txn_status_ = status;
      ev.ready = true;
      ev.status = status;
      if (status == 'I') {
        // Back to idle ends a transaction: an explicit one by its COMMIT/ROLLBACK tag, an implicit
        // one (a multi-statement Query, an extended-protocol segment) by committing unless it failed.
        ev.transaction_ended = true;
        ev.committed = before != 'I' ? (txn_tag_seen_ && txn_tag_commit_) : !error_since_ready_;
        search_path_.end_transaction(ev.committed);
        if (transactions_.enabled()) transactions_.ended(ev.committed);
      }
      txn_tag_seen_ = txn_tag_commit_ = false;
      error_since_ready_ = false;
      return ev;
    }
    default:
      account_reply(type, ev);
      return ev;
  }
}

}  // namespace predrop::proxy
