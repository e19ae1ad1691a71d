// The protocol decoder fed random bytes as an interleaving of a frontend and a backend stream,
// framed the way the relay frames them. Input: a sequence of records, each a control byte (bit 0:
// backend; bit 1: give every statement judged in this chunk a stand-in, by turns a refusal and a
// quarantine's substitute; bits 2-7: chunk length - 1) and that many bytes. Invariants, trapped: a
// frame never claims more bytes than it was given, a judged message is handed over whole (or its
// judged prefix exactly), the owed queue holds no more than what the client sent (plus the two
// entries each stand-in adds), a reply to a stand-in is edited into one well-formed message of its
// own type (or a substitute's CommandComplete replaced by the statement's tag), and only such a
// reply is edited (proxy/stand_in.hpp, stand_in_reply), the stats add up, and feeding
// every chunk byte by byte gives the same events as feeding it whole — the shape changes that
// committed (followed with shape tracking on, as the after capture runs it) included.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "parser/parser.hpp"
#include "proxy/decoder.hpp"
#include "proxy/stand_in.hpp"
#include "proxy/wire.hpp"

namespace {

using namespace predrop::proxy;

void check(bool ok) {
  if (!ok) __builtin_trap();
}

struct Pipe {
  std::string buf;
  size_t scan = 0;
  uint64_t pass_remaining = 0;
  bool lost = false;
  uint64_t messages = 0;
};

struct Run {
  Decoder& d;
  FrameLimits limits;
  Pipe front, back;
  uint64_t refusals = 0;
  std::string trace;   // one line per message: what the decoder made of it

  // What committed, was prepared or finished preparing, in the trace: the same whatever the reads.
  void take_outcomes() {
    ShapeOutcomes o = d.transactions().take_shape_outcomes();
    check(!o.empty() && !d.transactions().has_shape_outcomes());
    for (const auto& c : o.committed)
      trace += " +" + c.change.relation.schema + "." + c.change.relation.name + "#" + std::to_string(c.oid);
    for (const auto& [gid, changes] : o.prepared) trace += " p" + gid + ":" + std::to_string(changes.size());
    for (const auto& [gid, committed] : o.finished_prepared) trace += (committed ? " cp" : " rp") + gid;
  }

  // What the relay sends the client in place of a server reply: one message of the reply's type, its
  // length word true, never longer; a CommandComplete of a substitute replaced by a CommandComplete.
  void check_reply_edit(const BackendEvent& ev, const std::string& whole) {
    if (whole.size() < wire::kHeaderLen || wire::read_u32(whole.data() + 1) + 1 != whole.size()) return;   // a prefix
    std::string msg = whole;
    StandInReply r = stand_in_reply(ev, msg.data(), msg.size());
    if (r.replacement) {
      check(ev.substitute && whole[0] == 'C');
      check(r.replacement->size() > wire::kHeaderLen && (*r.replacement)[0] == 'C' &&
            wire::read_u32(r.replacement->data() + 1) + 1 == r.replacement->size());
      trace += "=" + *r.replacement;
      return;
    }
    check(r.total <= whole.size() && r.total >= wire::kHeaderLen && msg[0] == whole[0]);
    check(wire::read_u32(msg.data() + 1) + 1 == r.total);
    if (!ev.substitute && !ev.refusal_error) check(r.total == whole.size() && msg == whole);
    if (r.total != whole.size()) trace += "-" + std::to_string(whole.size() - r.total);
  }

  void feed(bool backend, std::string_view bytes, bool refuse) {
    Pipe& p = backend ? back : front;
    if (p.lost) return;
    p.buf.append(bytes);
    while (true) {
      if (p.pass_remaining > 0) {
        uint64_t n = std::min<uint64_t>(p.pass_remaining, p.buf.size() - p.scan);
        p.scan += n;
        p.pass_remaining -= n;
        if (p.pass_remaining > 0) break;
      }
      size_t avail = p.buf.size() - p.scan;
      const char* m = p.buf.data() + p.scan;
      Frame f = frame_message(backend ? backend_table() : frontend_table(), m, avail, limits);
      if (f.kind == Frame::Kind::incomplete) {
        check(f.need > avail);
        break;
      }
      if (f.kind == Frame::Kind::bad_length) {
        check(avail >= wire::kHeaderLen);
        check(f.length < 4 || f.length > limits.max_message_bytes);
        p.lost = true;
        break;
      }
      check(avail >= wire::kHeaderLen);
      check(f.type == m[0] && f.length == wire::read_u32(m + 1) && f.total == uint64_t{f.length} + 1);
      check(f.length >= 4 && f.length <= limits.max_message_bytes);
      ++p.messages;
      if (f.kind == Frame::Kind::stream) {
        check(f.need == wire::kHeaderLen);
        if (f.over_inspect_limit) check(!backend && f.total > limits.max_inspect_bytes);
        if (backend) d.on_backend_streamed(f.type, f.total);
        else d.on_frontend_streamed(f.type, f.total, f.over_inspect_limit);
        uint64_t n = std::min<uint64_t>(f.total, avail);
        p.scan += n;
        p.pass_remaining = f.total - n;
        trace += backend ? "b" : "f";
        trace += f.type;
        trace += std::to_string(f.total);
      } else {
        check(f.kind == Frame::Kind::judge);
        // Whole, or a prefix of a names message longer than the limit; never beyond what is buffered.
        check(f.need <= avail && f.need <= f.total);
        check(f.prefix ? (f.need < f.total && f.need == limits.max_inspect_bytes && !backend &&
                          frontend_table()[static_cast<unsigned char>(f.type)].need == Need::names)
                       : f.need == f.total);
        std::string whole(m, f.need);   // a copy the size of what is judged: ASan sees any overread
        if (backend) {
          BackendEvent ev = d.on_backend(whole);
          if (ev.kind == BackendEvent::Kind::malformed) check(!ev.error.empty());
          trace += "B" + std::to_string(static_cast<int>(ev.kind)) + (ev.desync ? "!" : "") + (ev.refusal_error ? "r" : "") +
                   (ev.substitute ? "s" : "");
          if (ev.kind == BackendEvent::Kind::relay) check_reply_edit(ev, whole);
        } else {
          FrontendEvent ev = d.on_frontend(whole, f.total);
          check(ev.kind != FrontendEvent::Kind::statement || (ev.facts && (f.type == 'Q' || f.type == 'E')));
          trace += "F" + std::to_string(static_cast<int>(ev.kind)) + (ev.facts ? ev.facts->normalized : "");
          if (refuse && ev.kind == FrontendEvent::Kind::statement) {
            if (refusals % 2 == 0) {
              d.stand_in_for_last(refusal_stand_in(f.type, "55000", "refused"));
              trace += "R";
            } else {
              auto subs = std::make_shared<const Substitutes>(
                  Substitutes{{0, "DROP TABLE", "DROP TABLE victim"}, {1, "DROP SCHEMA", "DROP SCHEMA s CASCADE"}});
              d.stand_in_for_last(substitute_stand_in(f.type, "DO $q$BEGIN NULL; END$q$", subs));
              trace += "S";
            }
            ++refusals;
          } else if (ev.kind == FrontendEvent::Kind::statement && ev.facts->destroys()) {
            // As if its hold snapshotted every target: the afters of its changes follow those OIDs.
            std::vector<HeldTable> held;
            std::vector<predrop::capture::PendingOutcome> checks;
            uint32_t oid = 16384;
            for (const auto& st : ev.facts->statements)
              for (const auto& t : st.targets) {
                checks.push_back({.oid = oid, .snapshot_id = "id", .event_id = "e"});
                held.push_back({t.relation.schema, t.relation.name, oid++, "id"});
              }
            d.note_held(std::move(held));
            d.note_outcome_checks(std::move(checks));
          }
        }
        p.scan += f.need;
        p.pass_remaining = f.total - f.need;
        if (d.transactions().has_shape_outcomes()) take_outcomes();
        // The relay takes the outcome checks at a ReadyForQuery back to idle (relay.cpp); an error
        // of their statement's after that leaves them as they were.
        if (backend && f.type == 'Z' && d.transaction_status() == 'I' && d.transactions().has_outcome_checks()) {
          size_t failed = 0;
          for (const auto& c : d.transactions().take_outcome_checks()) failed += c.statement_failed;
          trace += "O" + std::to_string(failed);
        }
      }
      check(d.owed().size() <= front.messages + 2 * refusals);
      check(d.owed().capacity_in_use() >= d.owed().size());
      trace += " " + std::to_string(d.owed().size()) + "\n";
    }
    if (p.scan > 4096) {
      p.buf.erase(0, p.scan);
      p.scan = 0;
    }
  }
};

struct Outcome {
  std::string trace;
  DecoderStats stats;
  size_t owed = 0;
  std::vector<std::string> path;
};

// bytewise: every record's bytes fed one at a time, in the same order: the relay may read any split.
Outcome run_once(const uint8_t* data, size_t size, bool bytewise) {
  static predrop::parser::Classifier classifier(256);
  Decoder d(classifier, {"$user", "public"});
  d.transactions().enable(true);
  // Small limits, so that streaming past them is reached with small inputs.
  Run run{d, FrameLimits{.max_message_bytes = 1u << 16, .max_inspect_bytes = 96}, {}, {}, 0, {}};
  size_t i = 0;
  while (i < size) {
    uint8_t ctl = data[i++];
    size_t n = std::min<size_t>((ctl >> 2) + 1, size - i);
    std::string_view bytes(reinterpret_cast<const char*>(data + i), n);
    if (bytewise)
      for (size_t k = 0; k < n; ++k) run.feed(ctl & 1, bytes.substr(k, 1), ctl & 2);
    else
      run.feed(ctl & 1, bytes, ctl & 2);
    i += n;
  }
  const DecoderStats& s = d.stats();
  check(s.frontend_messages == run.front.messages);
  check(s.backend_messages == run.back.messages);
  check(s.malformed <= s.frontend_messages + s.backend_messages);
  check(s.uninspected <= s.frontend_messages);
  // A ReadyForQuery counts one desync per entry it finds unanswered before its Sync, so desyncs are
  // bounded by the entries ever owed, not by the server's messages.
  check(s.desync <= s.backend_messages + s.frontend_messages + 2 * run.refusals);
  (void)d.search_path().effective("u");
  return {std::move(run.trace), s, d.owed().size(), d.search_path_ahead().current()};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Outcome chunks = run_once(data, size, false);
  Outcome bytes = run_once(data, size, true);
  // The same messages, the same events, whatever the reads were.
  check(chunks.trace == bytes.trace);
  check(chunks.owed == bytes.owed && chunks.path == bytes.path);
  check(chunks.stats.desync == bytes.stats.desync && chunks.stats.malformed == bytes.stats.malformed &&
        chunks.stats.uninspected == bytes.stats.uninspected && chunks.stats.frontend_messages == bytes.stats.frontend_messages);
  return 0;
}
