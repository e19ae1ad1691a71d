// What reaches the server in place of a held message, what the client is then owed, and how the
// server's replies to it are made the client's: built here together, so that a new kind of
// stand-in is written in one place. The hold (proxy/hold.hpp) picks
// the stand-in; the session only moves its bytes into the upstream pipe and hands it to the
// decoder (Decoder::stand_in_for_last), which changes the held message's owed entries to match.
//
// Both kinds go as the held message went: a Query for a Query; for an Execute, Parse + Bind + Execute
// of the unnamed statement and portal, whose ParseComplete and BindComplete predrop swallows. After
// an error the server skips to the client's own Sync, as it would have for the client's Execute.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "proxy/decoder.hpp"

namespace predrop::proxy {

struct StandIn {
  enum class Kind : uint8_t {
    refusal,      // the server raises predrop's error in the statement's place (its own ErrorResponse,
                  // aborted transaction and ReadyForQuery)
    substitute,   // the statement runs as its quarantine substitute; the replies are made the client's
  };
  Kind kind = Kind::refusal;
  std::string bytes;                                 // whole frontend messages
  std::shared_ptr<const Substitutes> substitutes;    // substitute: the statements replaced
};

// held_type: 'Q' or 'E', the held message's type.
StandIn refusal_stand_in(char held_type, std::string_view sqlstate, std::string_view message);
StandIn substitute_stand_in(char held_type, std::string_view sql, std::shared_ptr<const Substitutes> substitutes);

// The DO block that raises `message` with `sqlstate`. The message carries names the client chose and
// error text: it goes into an E'' literal with quotes and backslashes escaped (the same whatever
// standard_conforming_strings says), inside a dollar quote whose tag does not occur in it, so no name
// can end the literal or the DO body early.
std::string raise_sql(std::string_view sqlstate, std::string_view message);

// A server reply the decoder tied to a stand-in (BackendEvent::substitute, refusal_error), as the
// client must see it: the server's own bytes less what only the stand-in has.
//   - a substitute's CommandComplete ("DO") is replaced whole by the statement's own tag;
//   - a substitute's ErrorResponse / NoticeResponse loses the context lines naming the statement as
//     the substitute EXECUTEd it and the DO block's own line;
//   - the ErrorResponse of a refusal loses its context field (the PL/pgSQL line of raise_sql).
// Anything else is left as it is.
struct StandInReply {
  std::optional<std::string> replacement;   // set: send this instead of the message
  size_t total = 0;                         // else: the message's length once edited in place
};
// msg[0, total) is one whole backend message; it may be shortened in place.
StandInReply stand_in_reply(const BackendEvent& ev, char* msg, size_t total);

}  // namespace predrop::proxy
