// The real hold (proxy/hold.hpp) driven the way a session drives it, by random interleavings of
// client bytes, server bytes, capture answers (in time, failed, timed out, for an earlier hold),
// cancels, client departures and runs of the event loop. The session around it is in memory: it
// frames and judges with the real Decoder and begins a hold where Session::scan would, and applies
// each HoldEnd as Session::hold_ended does. The capture is in memory too: it keeps each request's
// answer callback until an op answers it.
//
// Input: a sequence of operations, each an op byte (low 3 bits: which; bit 3: the fail-closed policy
// for client bytes, an earlier hold's request for capture answers) and, for bytes, a length byte and
// that many bytes. Invariants, trapped:
//  - a hold begins only on a judged, whole Query or Execute whose facts destroy (real Classifier);
//  - every hold ends exactly once, never from inside begin, never after stop, and only by what was
//    meant for it: the first answer for it that the loop delivers, a cancel or the client leaving
//    (an answer for an earlier hold changes nothing);
//  - the ending follows the answer and the policy: written → released; failed or timed out →
//    failed_open, or refused under fail-closed; cancel → cancelled; client gone → client_left;
//    a written answer leaves outcome checks for the transaction's end, and so does a failed or
//    timed-out one whose statement goes on (failed_open: the store learns the table gone), with no
//    snapshot named; a refusal leaves none;
//  - when an ending is applied, the held message's bytes are all in the client buffer, where the
//    hold found them; a release advances exactly held_bytes; a stand-in removes exactly those bytes,
//    is whole messages of the held message's kind (a Query; Parse, Bind, Execute), and leaves the
//    owed queue ending the way the stand-in's replies will come (a refusal entry after predrop's own
//    Parse and Bind);
//  - at the end, answering everything and running the loop ends the last hold.
#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "parser/parser.hpp"
#include "policy/policy.hpp"
#include "proxy/decoder.hpp"
#include "proxy/hold.hpp"
#include "proxy/stand_in.hpp"
#include "proxy/wire.hpp"

namespace {

using namespace predrop::proxy;
namespace capture = predrop::capture;

void check(bool ok) {
  if (!ok) __builtin_trap();
}

// What an op did to the hold, in the order the loop will deliver it.
enum class Delivered : uint8_t { nothing_to_wait, written, failed, timed_out };

struct Request {
  uint64_t hold = 0;   // the ordinal of the hold that asked
  std::function<void(capture::SnapshotResult)> done;
  capture::SnapshotRequest request;
};

struct MemoryCapture final : HoldCapture {
  std::vector<Request> waiting;   // not yet answered, oldest first
  uint64_t current_hold = 0;
  void snapshot(capture::SnapshotRequest request, std::function<void(capture::SnapshotResult)> done) override {
    waiting.push_back({current_hold, std::move(done), std::move(request)});
  }
  void record_event(capture::EventRecord) override {}
  void mark_hold(const std::vector<capture::TableResult>&, double) override {}
};

struct MemorySession final : HoldHost, std::enable_shared_from_this<MemorySession> {
  MemorySession(predrop::parser::Classifier& classifier, std::shared_ptr<const predrop::policy::Config> open,
                std::shared_ptr<const predrop::policy::Config> closed)
      : d(classifier, {"$user", "public"}), open_cfg(std::move(open)), closed_cfg(std::move(closed)) {}

  boost::asio::io_context io;
  Decoder d;
  Hold hold{*this};
  MemoryCapture capture;
  std::shared_ptr<const predrop::policy::Config> open_cfg, closed_cfg;
  FrameLimits limits{.max_message_bytes = 1u << 16, .max_inspect_bytes = 512};

  std::string client;        // bytes read from the client, not yet relayed
  size_t scan = 0;           // client bytes before this are decided
  uint64_t pass_remaining = 0;
  std::string server;
  size_t server_scan = 0;
  uint64_t server_pass = 0;
  bool closed = false;
  bool fail_closed = false;  // the policy a hold begun now gets: set by the op that brought the bytes

  // The hold in progress, as the session saw it begin.
  bool holding = false;
  uint64_t hold_ordinal = 0;   // 1, 2, …
  bool hold_fail_closed = false;
  char held_type = 0;
  size_t held_at = 0;
  uint64_t held_bytes = 0;
  std::string held_copy;
  uint64_t begun = 0, ended = 0;
  uint64_t relayed = 0;
  bool in_begin = false;
  // What the loop will deliver, in order: (hold ordinal, what); cancels and departures are synchronous.
  struct Posted {
    uint64_t hold;
    Delivered what;
    size_t tables = 0;   // the tables the answer names
  };
  std::deque<Posted> posted;
  std::optional<HoldEnding> expected;   // set by a synchronous op just before it calls the hold

  boost::asio::any_io_executor hold_executor() override { return io.get_executor(); }
  std::weak_ptr<void> hold_lifetime() override { return weak_from_this(); }

  void hold_ended(HoldEnd end) override {
    check(!in_begin && !closed && holding);
    ++ended;
    holding = false;
    if (expected) {
      check(end.ending == *expected);
      expected.reset();
    } else {
      // Delivered by the loop: the first thing posted for this hold ended it; anything posted
      // before it was for earlier holds.
      while (!posted.empty() && posted.front().hold != hold_ordinal) posted.pop_front();
      check(!posted.empty());
      const Delivered what = posted.front().what;
      const size_t tables = posted.front().tables;
      posted.pop_front();
      switch (what) {
        case Delivered::nothing_to_wait:
          check(end.ending == HoldEnding::released && end.outcome_checks.empty());
          break;
        case Delivered::written:
          // Each table written leaves its DROP's outcome check for the transaction's end.
          check(end.ending == HoldEnding::released && !end.outcome_checks.empty());
          break;
        case Delivered::failed:
        case Delivered::timed_out:
          check(end.ending == (hold_fail_closed ? HoldEnding::refused : HoldEnding::failed_open));
          check(end.outcome_checks.size() == (end.ending == HoldEnding::refused ? 0 : tables));
          for (const auto& c : end.outcome_checks) check(c.snapshot_id.empty() && !c.event_id.empty());
          break;
      }
    }
    if (end.ending == HoldEnding::cancelled || end.ending == HoldEnding::client_left) check(end.outcome_checks.empty());
    // The held message is whole in the buffer, where it was when the hold began.
    check(held_at == scan && held_at + held_bytes <= client.size());
    check(std::memcmp(client.data() + held_at, held_copy.data(), held_bytes) == 0);
    switch (end.ending) {
      case HoldEnding::released:
      case HoldEnding::failed_open:
        check(!end.stand_in);   // no quarantine rule here: the statement goes as sent
        scan += held_bytes;
        relayed += held_bytes;
        break;
      case HoldEnding::refused:
      case HoldEnding::cancelled: {
        check(end.stand_in && end.stand_in->kind == StandIn::Kind::refusal);
        check_stand_in_bytes(end.stand_in->bytes);
        size_t owed_before = d.owed().size();
        d.stand_in_for_last(*end.stand_in);
        check_owed_after_refusal(owed_before);
        size_t before = client.size();
        client.erase(held_at, held_bytes);
        check(client.size() == before - held_bytes);
        break;
      }
      case HoldEnding::client_left:
        check(!end.stand_in);
        close();
        return;
    }
    scan_client();
  }

  // Whole frontend messages: one Query for a Query; Parse, Bind, Execute for an Execute.
  void check_stand_in_bytes(const std::string& bytes) {
    std::string types;
    size_t at = 0;
    while (at < bytes.size()) {
      check(bytes.size() - at >= 5);
      uint32_t len = (uint32_t(uint8_t(bytes[at + 1])) << 24) | (uint32_t(uint8_t(bytes[at + 2])) << 16) |
                     (uint32_t(uint8_t(bytes[at + 3])) << 8) | uint32_t(uint8_t(bytes[at + 4]));
      check(len >= 4 && bytes.size() - at - 1 >= len);
      types.push_back(bytes[at]);
      at += 1 + len;
    }
    check(types == (held_type == 'Q' ? "Q" : "PBE"));
  }

  void check_owed_after_refusal(size_t owed_before) {
    using K = OwedReply::Kind;
    const auto& owed = d.owed();
    if (owed_before == 0) return;   // nothing was owed for it (a desynchronised stream)
    check(!owed.empty());
    const OwedReply& last = owed.at(owed.size() - 1);
    check(last.refusal && last.injected);
    if (held_type == 'Q') {
      check(owed.size() == owed_before && last.kind == K::query);
      return;
    }
    check(owed.size() == owed_before + 2 && last.kind == K::execute);
    check(owed.at(owed.size() - 2).kind == K::bind && owed.at(owed.size() - 2).injected);
    check(owed.at(owed.size() - 3).kind == K::parse && owed.at(owed.size() - 3).injected);
  }

  void close() {
    closed = true;
    hold.stop();
  }

  void begin_hold(char type, std::shared_ptr<const predrop::parser::Facts> facts, size_t at, uint64_t total) {
    HoldInput in;
    in.type = type;
    in.held_bytes = total;
    in.context.database = "db";
    in.context.session_user = "u";
    in.context.client_addr = "fuzz";
    in.context.statement = facts->normalized;
    in.search_path = d.search_path_ahead();
    in.transaction_status = d.transaction_status();
    in.user = "u";
    in.session = 1;
    in.tracks_shape_changes = d.tracks_shape_changes();
    in.facts = std::move(facts);
    holding = true;
    ++begun;
    hold_ordinal = begun;
    hold_fail_closed = fail_closed;
    held_type = type;
    held_at = at;
    held_bytes = total;
    held_copy.assign(client.data() + at, total);
    capture.current_hold = hold_ordinal;
    size_t asked = capture.waiting.size();
    in_begin = true;
    hold.begin(std::move(in), fail_closed ? closed_cfg : open_cfg, &capture);
    in_begin = false;
    check(hold.active() && hold.held_bytes() == total);
    // No capture asked (every target temporary, say): the hold posted its own release.
    if (capture.waiting.size() == asked) posted.push_back({hold_ordinal, Delivered::nothing_to_wait});
    else check(capture.waiting.size() == asked + 1 && !capture.waiting.back().request.targets.empty());
  }

  void scan_client() {
    while (!closed && !holding) {
      if (pass_remaining > 0) {
        uint64_t n = std::min<uint64_t>(pass_remaining, client.size() - scan);
        scan += n;
        pass_remaining -= n;
        if (pass_remaining > 0) return;
      }
      size_t avail = client.size() - scan;
      const char* m = client.data() + scan;
      Frame f = frame_message(frontend_table(), m, avail, limits);
      if (f.kind == Frame::Kind::incomplete) return;
      if (f.kind == Frame::Kind::bad_length) return close();
      if (f.kind == Frame::Kind::stream) {
        d.on_frontend_streamed(f.type, f.total, f.over_inspect_limit);
        if (f.type == 'X') return close();
        uint64_t n = std::min<uint64_t>(f.total, avail);
        scan += n;
        pass_remaining = f.total - n;
        continue;
      }
      check(f.need <= avail);
      FrontendEvent ev = d.on_frontend(std::string_view(m, f.need), f.total);
      if (ev.kind == FrontendEvent::Kind::malformed) return close();
      if (ev.kind == FrontendEvent::Kind::statement && ev.facts->destroys() && !ev.facts->parse_error) {
        check((f.type == 'Q' || f.type == 'E') && !f.prefix && f.need == f.total);
        begin_hold(f.type, std::move(ev.facts), scan, f.total);
        return;
      }
      scan += f.need;
      pass_remaining = f.total - f.need;
    }
  }

  void scan_server() {
    while (true) {
      if (server_pass > 0) {
        uint64_t n = std::min<uint64_t>(server_pass, server.size() - server_scan);
        server_scan += n;
        server_pass -= n;
        if (server_pass > 0) return;
      }
      size_t avail = server.size() - server_scan;
      const char* m = server.data() + server_scan;
      Frame f = frame_message(backend_table(), m, avail, limits);
      if (f.kind == Frame::Kind::incomplete) return;
      if (f.kind == Frame::Kind::bad_length) {
        server.clear();
        server_scan = 0;
        return;
      }
      if (f.kind == Frame::Kind::stream) {
        d.on_backend_streamed(f.type, f.total);
        uint64_t n = std::min<uint64_t>(f.total, avail);
        server_scan += n;
        server_pass = f.total - n;
        continue;
      }
      d.on_backend(std::string_view(m, f.total));
      server_scan += f.total;
    }
  }

  // Answers a waiting request: the newest, or with `earlier` the oldest one of an earlier hold.
  void answer(Delivered what, bool earlier) {
    if (capture.waiting.empty()) return;
    size_t i = capture.waiting.size() - 1;
    if (earlier) {
      i = 0;
      if (capture.waiting[0].hold == hold_ordinal && holding) return;   // nothing earlier waits
    }
    Request r = std::move(capture.waiting[i]);
    capture.waiting.erase(capture.waiting.begin() + static_cast<long>(i));
    capture::SnapshotResult result;
    result.outcome = what == Delivered::written    ? capture::SnapshotOutcome::written
                     : what == Delivered::failed ? capture::SnapshotOutcome::capture_error
                                                 : capture::SnapshotOutcome::timeout;
    for (const auto& t : r.request.targets) {
      capture::TableResult tr;
      tr.schema = t.schema.empty() ? "public" : t.schema;
      tr.table = t.name;
      tr.oid = 16384;
      tr.outcome = result.outcome;
      tr.event_id = "00000000-0000-0000-0000-000000000002";   // every target's ledger row
      if (what == Delivered::written) tr.snapshot_id = "00000000-0000-0000-0000-000000000001";
      result.tables.push_back(std::move(tr));
    }
    posted.push_back({r.hold, what, result.tables.size()});
    r.done(std::move(result));   // posts onto the loop, as the capture service's thread does
  }

  void run_loop() {
    io.restart();
    io.poll();
  }

  // Synchronous ops: they end the active hold at once, if there is one, and nothing else.
  void end_now(HoldEnding ending, void (Hold::*op)()) {
    check(hold.active() == holding);
    const bool was = holding;
    if (was) expected = ending;
    const uint64_t before = ended;
    (hold.*op)();
    check(ended == before + (was ? 1 : 0));
    expected.reset();
  }
  void cancel() { end_now(HoldEnding::cancelled, &Hold::cancel); }
  void client_gone() { end_now(HoldEnding::client_left, &Hold::client_gone); }
};

std::shared_ptr<const predrop::policy::Config> load(const char* yaml) {
  auto r = predrop::policy::load_string(yaml, "fuzz_hold");
  if (!r.config) std::abort();
  return r.config;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static predrop::parser::Classifier classifier(256);
  static const bool quiet = (spdlog::set_level(spdlog::level::off), true);
  (void)quiet;
  // A table in schema `skipped` is a hold with nothing to wait for (the rule skips it).
  static auto open_cfg = load("snapshots:\n  hold_timeout_ms: 60000\nrules:\n  - {schema: skipped, action: skip}\n");
  static auto closed_cfg = load(
      "snapshots:\n  hold_timeout_ms: 60000\nrules:\n  - {schema: skipped, action: skip}\n"
      "  - {schema: \"*\", on_failure: closed}\n");
  auto s = std::make_shared<MemorySession>(classifier, open_cfg, closed_cfg);
  size_t i = 0;
  while (i < size && !s->closed) {
    check(s->hold.active() == s->holding);
    uint8_t op = data[i++];
    switch (op & 7) {
      case 0:
      case 1: {
        if (i >= size) break;
        size_t want = data[i++];
        size_t n = std::min<size_t>(want, size - i);
        std::string_view bytes(reinterpret_cast<const char*>(data + i), n);
        i += n;
        if (op & 1) {
          s->server.append(bytes);
          s->scan_server();
        } else {
          s->fail_closed = op & 8;
          s->client.append(bytes);   // read while held too: it waits behind the held message
          s->scan_client();
        }
        break;
      }
      case 2: s->answer(Delivered::written, op & 8); break;
      case 3: s->answer(Delivered::failed, op & 8); break;
      case 4: s->answer(Delivered::timed_out, op & 8); break;
      case 5: s->cancel(); break;
      case 6: s->client_gone(); break;
      case 7: s->run_loop(); break;
    }
  }
  // Whatever still waits is answered and delivered: the last hold ends, and only once.
  while (!s->closed && (s->holding || !s->capture.waiting.empty())) {
    uint64_t before = s->ended;
    if (!s->capture.waiting.empty()) s->answer(Delivered::written, false);
    s->run_loop();
    if (s->holding && s->capture.waiting.empty() && s->ended == before) check(false);
  }
  check(s->ended + (s->holding ? 1 : 0) == s->begun);
  // FUZZ_HOLD_TRACE=1 ./fuzz_hold seed…: whether a seed reaches holds at all.
  static const bool trace = std::getenv("FUZZ_HOLD_TRACE") != nullptr;
  if (trace)
    std::fprintf(stderr, "holds begun %llu ended %llu, %llu bytes released, %zu owed\n",
                 static_cast<unsigned long long>(s->begun), static_cast<unsigned long long>(s->ended),
                 static_cast<unsigned long long>(s->relayed), s->d.owed().size());
  check(s->relayed <= s->client.size());
  // The session goes, the hold with it: anything still posted finds it gone and does nothing.
  s->close();
  return 0;
}
