// The hold's state machine driven with the decoder the way a session drives them, by random
// interleavings of client bytes, server bytes, capture results, timeouts, cancels and closes.
// Input: a sequence of operations, each an op byte (low 3 bits: which; bit 3: a stale id for capture
// answers and timeouts, fail-closed policy for client bytes) and, for bytes, a length byte and that
// many bytes. Invariants, trapped:
//  - a hold begins only on a judged, whole Query or Execute whose facts destroy (real Classifier);
//  - every hold ends exactly once, and only by an answer meant for it (a stale id changes nothing);
//  - when an ending is applied, the held message's bytes are all in the client buffer, where the
//    hold found them; a release advances exactly held_bytes; a refusal or cancel removes exactly
//    those bytes and calls replace_last_with_refusal; client_left relays nothing.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <string_view>

#include "parser/parser.hpp"
#include "proxy/decoder.hpp"
#include "proxy/hold_machine.hpp"
#include "proxy/wire.hpp"

namespace {

using namespace predrop::proxy;
using Event = HoldMachine::Event;

void check(bool ok) {
  if (!ok) __builtin_trap();
}

struct ModelSession {
  explicit ModelSession(Decoder& decoder) : d(decoder) {}
  Decoder& d;
  HoldMachine hold;
  FrameLimits limits{.max_message_bytes = 1u << 16, .max_inspect_bytes = 512};
  std::string client;        // bytes read from the client, not yet relayed
  size_t scan = 0;           // client bytes before this are decided
  uint64_t pass_remaining = 0;
  std::string server;
  size_t server_scan = 0;
  uint64_t server_pass = 0;
  bool closed = false;
  bool fail_closed = false;   // the policy a hold begun now gets: set by the op that brought the bytes
  // The hold in progress, as the session records it when it begins.
  uint64_t held_id = 0;
  size_t held_at = 0;
  uint64_t held_bytes = 0;
  std::string held_copy;     // the message as it was judged
  std::set<uint64_t> ended;
  uint64_t begun = 0;
  uint64_t relayed = 0;      // client bytes passed to the server

  void scan_client() {
    while (!closed && !hold.active()) {
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
      if (f.kind == Frame::Kind::bad_length) {
        closed = true;
        return;
      }
      if (f.kind == Frame::Kind::stream) {
        d.on_frontend_streamed(f.type, f.total, f.over_inspect_limit);
        if (f.type == 'X') closed = true;
        uint64_t n = std::min<uint64_t>(f.total, avail);
        scan += n;
        pass_remaining = f.total - n;
        continue;
      }
      check(f.need <= avail);
      FrontendEvent ev = d.on_frontend(std::string_view(m, f.need), f.total);
      if (ev.kind == FrontendEvent::Kind::malformed) {
        closed = true;
        return;
      }
      if (ev.kind == FrontendEvent::Kind::statement && ev.facts->destroys() && !ev.facts->parse_error) {
        check((f.type == 'Q' || f.type == 'E') && !f.prefix && f.need == f.total);
        held_id = hold.begin(fail_closed);
        check(hold.active() && hold.id() == held_id);
        check(!ended.count(held_id));
        ++begun;
        held_at = scan;
        held_bytes = f.total;
        held_copy.assign(m, f.total);
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

  void apply(std::optional<HoldEnding> ending, bool was_active, uint64_t id_asked, Event event) {
    bool addressed = event == Event::cancel || event == Event::client_gone || id_asked == held_id;
    if (!was_active || !addressed) {
      check(!ending);   // no hold, or an answer for an earlier one: nothing changes
      check(hold.active() == was_active);
      return;
    }
    check(ending.has_value());
    check(!hold.active());
    check(ended.insert(held_id).second);   // exactly once
    // The held message is whole in the buffer, where it was when the hold began.
    check(held_at == scan && held_at + held_bytes <= client.size());
    check(std::memcmp(client.data() + held_at, held_copy.data(), held_bytes) == 0);
    switch (*ending) {
      case HoldEnding::released:
      case HoldEnding::failed_open:
        check(event == Event::capture_ok || event == Event::nothing_to_wait ||
              ((event == Event::capture_failed || event == Event::timeout) && !hold.fail_closed()));
        scan += held_bytes;
        relayed += held_bytes;
        break;
      case HoldEnding::refused:
      case HoldEnding::cancelled: {
        check(*ending == HoldEnding::cancelled ? event == Event::cancel
                                               : hold.fail_closed() && (event == Event::capture_failed || event == Event::timeout));
        size_t before = client.size();
        d.replace_last_with_refusal();
        client.erase(held_at, held_bytes);
        check(client.size() == before - held_bytes);
        break;
      }
      case HoldEnding::client_left:
        check(event == Event::client_gone);
        closed = true;
        return;
    }
    scan_client();
  }

  void signal(Event event, bool stale) {
    bool was_active = hold.active();
    uint64_t id = event == Event::cancel || event == Event::client_gone ? 0 : stale ? held_id - 1 : held_id;
    if (stale && held_id == 0) id = 7;
    apply(hold.on(event, id), was_active, id, event);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static predrop::parser::Classifier classifier(256);
  Decoder d(classifier, {"$user", "public"});
  ModelSession s(d);
  size_t i = 0;
  while (i < size && !s.closed) {
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
          s.server.append(bytes);
          s.scan_server();
        } else {
          s.fail_closed = op & 8;
          s.client.append(bytes);   // read while held too: it waits behind the held message
          s.scan_client();
        }
        break;
      }
      case 2: s.signal(Event::capture_ok, op & 8); break;
      case 3: s.signal(Event::capture_failed, op & 8); break;
      case 4: s.signal(Event::timeout, op & 8); break;
      case 5: s.signal(Event::cancel, false); break;
      case 6: s.signal(Event::client_gone, false); break;
      case 7: s.signal(Event::nothing_to_wait, op & 8); break;
    }
  }
  check(s.ended.size() + (s.hold.active() ? 1 : 0) == s.begun);
  // FUZZ_HOLD_TRACE=1 ./fuzz_hold seed…: whether a seed reaches holds at all.
  static const bool trace = std::getenv("FUZZ_HOLD_TRACE") != nullptr;
  if (trace)
    std::fprintf(stderr, "holds begun %llu ended %zu, %llu bytes released, %zu owed\n",
                 static_cast<unsigned long long>(s.begun), s.ended.size(), static_cast<unsigned long long>(s.relayed),
                 d.owed().size());
  check(s.relayed <= s.client.size());
  return 0;
}
