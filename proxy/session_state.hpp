// Where a session is in its life, as one value instead of flags (issue 24):
//
//   startup ──► relaying ──► closed        the server's session, relayed (holds happen here)
//      │    └──► console ──► closed        predrop's console (proxy/console.cpp)
//      └─────────────────────► closed      refused, timed out or gone before either
//
// Holding is not a phase of its own: a relaying session holds while its Hold is active
// (proxy/hold.hpp), and what it is doing then (idle, active, in a transaction) is the decoder's.
#pragma once

#include <cstdint>

namespace predrop::proxy {

enum class SessionPhase : uint8_t { startup, relaying, console, closed };

class SessionState {
 public:
  SessionPhase phase() const { return phase_; }
  bool relaying() const { return phase_ == SessionPhase::relaying; }
  bool console() const { return phase_ == SessionPhase::console; }
  bool closed() const { return phase_ == SessionPhase::closed; }

  // Whether a session ever moves from `from` to `to`: forward along the picture above, never back,
  // and closed is final.
  static constexpr bool allowed(SessionPhase from, SessionPhase to) {
    switch (from) {
      case SessionPhase::startup: return to != SessionPhase::startup;
      case SessionPhase::relaying:
      case SessionPhase::console: return to == SessionPhase::closed;
      case SessionPhase::closed: return false;
    }
    return false;
  }
  // Moves on and returns the phase it left; a move the picture does not have changes nothing and
  // returns the phase as it is (the caller checks, as close() does by being idempotent).
  SessionPhase move_to(SessionPhase to) {
    SessionPhase was = phase_;
    if (allowed(was, to)) phase_ = to;
    return was;
  }

 private:
  SessionPhase phase_ = SessionPhase::startup;
};

}  // namespace predrop::proxy
