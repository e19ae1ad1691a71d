// Session's phases (proxy/session_state.hpp) as a table: every move, allowed or not.
#include <gtest/gtest.h>

#include "proxy/session_state.hpp"

namespace {

using predrop::proxy::SessionPhase;
using predrop::proxy::SessionState;
using P = SessionPhase;

struct Move {
  P from, to;
  bool allowed;
};

// Rows: from; columns: startup, relaying, console, closed.
constexpr Move kMoves[] = {
    {P::startup, P::startup, false},   {P::startup, P::relaying, true},   {P::startup, P::console, true},
    {P::startup, P::closed, true},     {P::relaying, P::startup, false},  {P::relaying, P::relaying, false},
    {P::relaying, P::console, false},  {P::relaying, P::closed, true},    {P::console, P::startup, false},
    {P::console, P::relaying, false},  {P::console, P::console, false},   {P::console, P::closed, true},
    {P::closed, P::startup, false},    {P::closed, P::relaying, false},   {P::closed, P::console, false},
    {P::closed, P::closed, false},
};

// A state in `phase`, reached the way a session reaches it.
SessionState at(P phase) {
  SessionState s;
  if (phase == P::closed) {
    s.move_to(P::relaying);
    s.move_to(P::closed);
  } else if (phase != P::startup) {
    s.move_to(phase);
  }
  EXPECT_EQ(s.phase(), phase);
  return s;
}

TEST(SessionState, EveryMoveOfTheTable) {
  static_assert(std::size(kMoves) == 16, "every pair of the four phases");
  for (const Move& m : kMoves) {
    EXPECT_EQ(SessionState::allowed(m.from, m.to), m.allowed)
        << static_cast<int>(m.from) << " -> " << static_cast<int>(m.to);
    SessionState s = at(m.from);
    EXPECT_EQ(s.move_to(m.to), m.from);
    EXPECT_EQ(s.phase(), m.allowed ? m.to : m.from);
  }
}

TEST(SessionState, ANewSessionIsInStartupAndEachPredicateNamesOnePhase) {
  SessionState s;
  EXPECT_EQ(s.phase(), P::startup);
  EXPECT_FALSE(s.relaying() || s.console() || s.closed());
  EXPECT_TRUE(at(P::relaying).relaying());
  EXPECT_TRUE(at(P::console).console());
  EXPECT_TRUE(at(P::closed).closed());
  EXPECT_FALSE(at(P::closed).relaying());
}

}  // namespace
