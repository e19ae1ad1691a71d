// PostgreSQL v3 wire facts: framing, startup packets, and the few messages predrop builds itself.
// Decoding is separate from policy: this file says what bytes mean, never what to do about them.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace predrop::proxy::wire {

inline constexpr uint32_t kProtocol3 = 3u << 16;
inline constexpr uint32_t kCancelRequestCode = 80877102;
inline constexpr uint32_t kSslRequestCode = 80877103;
inline constexpr uint32_t kGssEncRequestCode = 80877104;
inline constexpr uint32_t kMaxStartupPacket = 10000;   // the server's own limit
// A protocol code no server speaks nor negotiates (major 1234, minor 0: the negotiation codes are
// 1234.5678 to 1234.5680). The server refuses it in the words it uses for every major version it
// does not speak, naming its own range, so its refusal stands for its refusal of a code it cannot be
// asked about (a negotiation repeated, which would only start a negotiation afresh).
inline constexpr uint32_t kUnspokenProtocolCode = 1234u << 16;
inline constexpr size_t kHeaderLen = 5;                  // type byte + Int32 length

inline uint32_t read_u32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return __builtin_bswap32(v);
}
inline void write_u32(char* p, uint32_t v) {
  v = __builtin_bswap32(v);
  std::memcpy(p, &v, 4);
}

// A parsed StartupMessage (protocol 3.x). The raw bytes are relayed as received; these are copies.
struct StartupParams {
  uint32_t protocol = 0;
  std::vector<std::pair<std::string, std::string>> params;
  std::string get(std::string_view key) const;
};

// Parses the body after the length word (code included). nullopt on malformed content.
std::optional<StartupParams> parse_startup(const char* data, size_t len);

// ErrorResponse / NoticeResponse bodies.
std::string error_response(std::string_view severity, std::string_view sqlstate, std::string_view message,
                           std::string_view detail = {}, std::string_view hint = {});
std::string ready_for_query(char status);

// SQLSTATE and message of an ErrorResponse body (fields after the type+length header).
struct ErrorFields {
  std::string severity, sqlstate, message;
};
ErrorFields parse_error_fields(const char* body, size_t len);

// AuthenticationSASL (R, code 10): remove SCRAM-SHA-256-PLUS from the mechanism list.
// Works in place on a whole message (header included); returns the new total length.
size_t strip_scram_plus(char* msg, size_t len);

// ErrorResponse / NoticeResponse: remove every field with this code. Works in place on a whole
// message (header included); returns the new total length.
size_t remove_error_field(char* msg, size_t len, char code);

// ErrorResponse / NoticeResponse raised inside a substitute that EXECUTEd `statement`: its context
// field ends with the line naming that statement and the DO's own line. Removes them (and the
// field, when nothing else is left). Works in place; returns the new total length.
size_t remove_substitute_context(char* msg, size_t len, std::string_view statement);
// The server's refusal of one protocol code, made the refusal of another: `reply` must be exactly
// one ErrorResponse whose message names `from` (as "1234.0"); that name becomes `to`, every other
// byte (severity, code, the server's file, line and routine, a translation) stays the server's.
// nullopt for anything else.
std::optional<std::string> rename_refused_protocol(std::string_view reply, std::string_view from, std::string_view to);

// A StartupMessage (length word included) with these parameters, in their order.
std::string startup_packet(const StartupParams& startup);
// RowDescription of text columns, and a DataRow (nullopt: NULL), as the console answers.
std::string row_description(const std::vector<std::string>& columns);
std::string data_row(const std::vector<std::optional<std::string>>& values);

// A message of this type and body (length word written), appended to out.
void append_message(std::string& out, char type, std::string_view body);
// SQL predrop sends itself: text as an E'' literal, quotes and backslashes doubled, which reads the
// same whatever standard_conforming_strings says.
std::string e_literal(std::string_view text);

// A CommandComplete message with this tag.
std::string command_complete(std::string_view tag);

// The value of a setting (lower case, "search_path") given in the startup packet's options
// parameter as "-c search_path=a,b" or "--search_path=a"; the last one counts, as on the server.
std::optional<std::string> setting_from_options(std::string_view options, std::string_view setting_name);

}  // namespace predrop::proxy::wire
