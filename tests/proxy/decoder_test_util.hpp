// Wire messages built byte by byte, and a replay of a session's two byte streams through the
// decoder framed the way the relay frames them (proxy/relay.cpp): for the decoder's unit tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "proxy/decoder.hpp"
#include "proxy/wire.hpp"

namespace dectest {

using namespace predrop::proxy;

inline std::string msg(char type, std::string_view body) {
  std::string m(1, type);
  char len[4];
  wire::write_u32(len, static_cast<uint32_t>(body.size() + 4));
  m.append(len, 4);
  m.append(body);
  return m;
}
inline std::string cstr(std::string_view s) { return std::string(s) + '\0'; }
inline std::string be16(uint16_t v) { return {static_cast<char>(v >> 8), static_cast<char>(v & 0xff)}; }
inline std::string be32(uint32_t v) {
  std::string s(4, '\0');
  wire::write_u32(s.data(), v);
  return s;
}

// Frontend messages.
inline std::string query(std::string_view sql) { return msg('Q', cstr(sql)); }
inline std::string parse(std::string_view name, std::string_view sql) { return msg('P', cstr(name) + cstr(sql) + be16(0)); }
inline std::string bind_msg(std::string_view portal, std::string_view stmt, uint16_t result_formats = 0) {
  std::string b = cstr(portal) + cstr(stmt) + be16(0) + be16(0) + be16(result_formats);
  for (uint16_t i = 0; i < result_formats; ++i) b += be16(0);
  return msg('B', b);
}
inline std::string execute(std::string_view portal, uint32_t max_rows = 0) { return msg('E', cstr(portal) + be32(max_rows)); }
inline std::string describe(char what, std::string_view name) { return msg('D', std::string(1, what) + cstr(name)); }
inline std::string close_msg(char what, std::string_view name) { return msg('C', std::string(1, what) + cstr(name)); }
inline std::string sync() { return msg('S', ""); }
inline std::string flush() { return msg('H', ""); }
inline std::string function_call() { return msg('F', be32(1234) + be16(0) + be16(0) + be16(0)); }

// Backend messages.
inline std::string parse_complete() { return msg('1', ""); }
inline std::string bind_complete() { return msg('2', ""); }
inline std::string close_complete() { return msg('3', ""); }
inline std::string no_data() { return msg('n', ""); }
inline std::string row_description() { return msg('T', be16(0)); }
inline std::string parameter_description() { return msg('t', be16(0)); }
inline std::string data_row() { return msg('D', be16(1) + be32(1) + "1"); }
inline std::string command_complete(std::string_view tag) { return msg('C', cstr(tag)); }
inline std::string ready(char status = 'I') { return msg('Z', std::string(1, status)); }
inline std::string error(std::string_view sqlstate = "42000", std::string_view text = "boom") {
  return msg('E', "SERROR" + std::string(1, '\0') + "C" + cstr(sqlstate) + "M" + cstr(text) + std::string(1, '\0'));
}
// An ErrorResponse (or with type 'N' a NoticeResponse) of these fields, each its code and value.
inline std::string error_fields(const std::vector<std::string>& fields, char type = 'E') {
  std::string body;
  for (const auto& f : fields) body += cstr(f);
  return msg(type, body + std::string(1, '\0'));
}
inline std::string empty_query() { return msg('I', ""); }
inline std::string portal_suspended() { return msg('s', ""); }
inline std::string function_result() { return msg('V', be32(1) + "x"); }

// One whole message through frame_message and the decoder, as the relay passes it: a judged one
// whole, or its first `need` bytes when the frame judges a prefix.
inline FrontendEvent front(Decoder& d, const std::string& m, const FrameLimits& limits = {}) {
  Frame f = frame_message(frontend_table(), m.data(), m.size(), limits);
  EXPECT_TRUE(f.kind == Frame::Kind::judge || f.kind == Frame::Kind::stream) << "type " << m[0];
  EXPECT_EQ(f.total, m.size());
  if (f.kind == Frame::Kind::judge) return d.on_frontend(std::string_view(m.data(), f.need), f.total);
  d.on_frontend_streamed(f.type, f.total, f.over_inspect_limit);
  FrontendEvent ev;
  ev.type = f.type;
  return ev;
}
inline BackendEvent back(Decoder& d, const std::string& m) {
  Frame f = frame_message(backend_table(), m.data(), m.size(), FrameLimits{});
  EXPECT_TRUE(f.kind == Frame::Kind::judge || f.kind == Frame::Kind::stream) << "type " << m[0];
  EXPECT_EQ(f.total, m.size());
  if (f.kind == Frame::Kind::judge) return d.on_backend(m);
  BackendEvent ev;
  d.on_backend_streamed(f.type, f.total);
  return ev;
}
inline void back_all(Decoder& d, std::initializer_list<std::string> ms) {
  for (const auto& m : ms) back(d, m);
}

// A recorded session: chunks in the order a relay read them. File format (record-session.py):
// 'F' or 'B', u32 big-endian length, bytes; the first frontend bytes are the startup packet.
struct Chunk {
  bool backend;
  std::string bytes;
};
std::vector<Chunk> load_session(const std::string& path);

// Both directions of one session framed and decoded as relay.cpp does it: a streamed message's
// body passes unexamined, a judged one is handed over whole. Every message appends one line to
// `events`: direction, type, frame kind, length, what the decoder said, and the owed queue after it.
class Replayer {
 public:
  Replayer(Decoder& d, FrameLimits limits = {}) : d_(d), limits_(limits) {}
  void feed(bool backend, std::string_view bytes);
  std::vector<std::string> events;
  bool lost = false;   // a bad length: the stream cannot go on

 private:
  struct Pipe {
    std::string buf;
    size_t scan = 0;
    uint64_t pass_remaining = 0;
    bool startup_seen = false;
  };
  void run(Pipe& p, bool backend);
  Decoder& d_;
  FrameLimits limits_;
  Pipe front_, back_;
};

std::string facts_print(const std::shared_ptr<const predrop::parser::Facts>& f);

}  // namespace dectest
