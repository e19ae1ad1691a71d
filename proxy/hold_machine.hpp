// The hold's transitions, with no timer, socket or policy: what proxy/hold.hpp drives (and
// tests/fuzz/fuzz_hold.cpp with it).
#pragma once

#include <cstdint>
#include <optional>

namespace predrop::proxy {

// How a hold ended. released and failed_open relay the held message as it is; refused and
// cancelled send a stand-in that makes the server raise the error in its place; client_left
// relays nothing and closes.
enum class HoldEnding : uint8_t { released, failed_open, refused, cancelled, client_left };
const char* to_string(HoldEnding e);

// The hold's transitions without timers or sockets. Every hold ends exactly once; an answer
// that arrives for an earlier hold (a capture result after a timeout) changes nothing.
class HoldMachine {
 public:
  enum class Event : uint8_t { nothing_to_wait, capture_ok, capture_failed, timeout, cancel, client_gone };
  // Starts a hold and returns its id. A hold must have ended before the next begins.
  uint64_t begin(bool fail_closed);
  // The ending `event` causes for hold `id`, or nothing: no hold, or not this one.
  // cancel and client_gone apply to whatever hold is active.
  std::optional<HoldEnding> on(Event event, uint64_t id);
  bool active() const { return active_; }
  uint64_t id() const { return id_; }
  bool fail_closed() const { return fail_closed_; }

 private:
  uint64_t id_ = 0;
  bool active_ = false;
  bool fail_closed_ = false;
};

}  // namespace predrop::proxy
