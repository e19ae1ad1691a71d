// The real Session (proxy/session.hpp) with its real hold, driven over real sockets: the client leg
// is a socketpair, the upstream a loopback TCP connection to a fake server in this process that
// answers every message in protocol order; the capture is in memory and answers when an op says.
// Everything runs on one io_context, polled until quiet after each op. The fuzz input chooses the
// client's messages (statements from a list that reaches every kind of hold: released, skipped,
// fail-closed, quarantined; or text of its own), as simple or extended queries, and when the
// capture answers (written, failed, timed out) and when the client leaves.
//
// It also takes the roads a well-behaved client does not: an SSLRequest or GSSENCRequest before the
// startup (answered 'N', as no tls is configured), COPY FROM STDIN (ended by CopyDone or CopyFail)
// and COPY TO STDOUT between the statements, and bytes of the input's own, raw or as a message of a
// type of its own, after which the session may end the connection as the server would.
//
// Invariants, trapped: what the server receives is what the client sent, in order, except that a
// held message the hold refused or substituted arrives as its stand-in (a DO block, as a Query, or
// as Parse + Bind + Execute of the unnamed statement) in exactly its place, and once the client
// leaves nothing more; the session finds no fault in those well-formed messages and stays open
// until its client leaves; every capture request ends its hold (the hold endings counted by /metrics
// grow at least by the requests); and ASan and UBSan see nothing. Once the input sent bytes of its own,
// only the last two, and that the session lets go of everything, still hold. This complements fuzz_hold, which
// drives the hold alone through every interleaving of its answers.
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <boost/asio.hpp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "policy/policy.hpp"
#include "proxy/buffer_pool.hpp"
#include "proxy/context.hpp"
#include "proxy/hold.hpp"
#include "proxy/metrics.hpp"
#include "proxy/session.hpp"
#include "proxy/wire.hpp"

namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using namespace predrop::proxy;
namespace capture = predrop::capture;

void check(bool ok) {
  if (!ok) __builtin_trap();
}

// What each kind of statement does here: held and released, skipped by a rule, refused when its
// capture fails (schema closed), quarantined (schema q), or never held.
constexpr const char* kStatements[] = {
    "DROP TABLE t",
    "DROP TABLE skipped.t",
    "DROP TABLE closed.t",
    "DROP TABLE q.t",
    "SELECT 1",
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    "DROP TABLE a; SELECT 1",
    "SELECT 1; DROP TABLE closed.b",
    "TRUNCATE closed.t",
    "ALTER TABLE t DROP COLUMN c",
    "DROP SCHEMA s CASCADE",
    "CREATE TABLE t (a int)",
    "DROP TABLE IF EXISTS q.t, t",
    "SET search_path = closed",
};

std::string message(char type, std::string_view body) {
  std::string m;
  wire::append_message(m, type, body);
  return m;
}
std::string cstr(std::string_view s) { return std::string(s) + '\0'; }

struct Request {
  capture::SnapshotRequest request;
  std::function<void(capture::SnapshotResult)> done;
};

struct MemoryCapture final : HoldCapture {
  std::vector<Request> waiting;
  uint64_t requests = 0;
  void snapshot(capture::SnapshotRequest request, std::function<void(capture::SnapshotResult)> done) override {
    ++requests;
    waiting.push_back({std::move(request), std::move(done)});
  }
  void record_event(capture::EventRecord) override {}
  void mark_hold(const std::vector<capture::TableResult>&, double) override {}

  void answer(capture::SnapshotOutcome outcome) {
    if (waiting.empty()) return;
    Request r = std::move(waiting.front());
    waiting.erase(waiting.begin());
    capture::SnapshotResult result;
    result.outcome = outcome;
    for (const auto& t : r.request.targets) {
      capture::TableResult tr;
      tr.schema = t.schema.empty() ? "public" : t.schema;
      tr.table = t.name;
      tr.oid = 16384;
      tr.outcome = outcome;
      if (outcome == capture::SnapshotOutcome::written) tr.snapshot_id = "00000000-0000-0000-0000-000000000001";
      result.tables.push_back(std::move(tr));
    }
    r.done(std::move(result));
  }
};

// The server's side of the upstream connection: reads what predrop sends and answers it.
struct FakeServer {
  int fd = -1;
  std::string in;          // received, not yet answered
  std::string received;    // every message after the startup packet, whole, in order
  bool started = false;
  bool skipping = false;   // after an error in the extended protocol: up to Sync, as the server
  bool unnamed_is_do = false;
  bool copy_in = false;    // after CopyInResponse, until CopyDone or CopyFail
  bool dead = false;       // a message no server would frame: it ended the connection

  void pump() {
    char buf[8192];
    for (;;) {
      ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n <= 0) break;
      in.append(buf, static_cast<size_t>(n));
    }
    std::string out;
    for (;;) {
      if (!started) {
        if (in.size() < 4) break;
        uint32_t len = wire::read_u32(in.data());
        if (in.size() < len) break;
        in.erase(0, len);
        started = true;
        out += message('R', std::string("\0\0\0\0", 4)) + message('Z', "I");
        continue;
      }
      if (dead || in.size() < 5) break;
      uint32_t len = wire::read_u32(in.data() + 1);
      if (len < 4) {   // the server's "invalid message length": FATAL, and the connection ends
        dead = true;
        out += message('E', cstr("SFATAL") + cstr("C08P01") + cstr("Minvalid message length") + std::string(1, '\0'));
        (void)::send(fd, out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        ::shutdown(fd, SHUT_RDWR);
        return;
      }
      if (in.size() < len + 1) break;
      std::string m = in.substr(0, len + 1);
      in.erase(0, len + 1);
      received += m;
      answer(m, out);
    }
    if (!out.empty()) (void)::send(fd, out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  }

  static std::string error() {
    return message('E', cstr("SERROR") + cstr("C55000") + cstr("Mrefused") + cstr("WPL/pgSQL function inline_code_block line 1 at RAISE") +
                            std::string(1, '\0'));
  }

  // CopyInResponse and CopyOutResponse: text, one column.
  static std::string copy_response(char type) { return message(type, std::string("\0\0\1\0\0", 5)); }

  void answer(const std::string& m, std::string& out) {
    std::string_view body(m.data() + 5, m.size() - 5);
    const bool is_do = body.substr(0, 3) == "DO ";
    if (copy_in) {
      // As the server's CopyGetData: Flush and Sync are ignored, anything else ends the COPY with an
      // error (and is consumed by it).
      switch (m[0]) {
        case 'd': case 'H': case 'S': return;
        case 'c': copy_in = false; out += message('C', cstr("COPY 1")) + message('Z', "I"); return;
        default: copy_in = false; out += error() + message('Z', "I"); return;
      }
    }
    switch (m[0]) {
      case 'Q':
        if (body.substr(0, 5) == "COPY " && body.find("FROM STDIN") != std::string_view::npos) {
          copy_in = true;
          out += copy_response('G');
        } else if (body.substr(0, 5) == "COPY ") {
          out += copy_response('H') + message('d', "1\n") + message('c', "") + message('C', cstr("COPY 1")) + message('Z', "I");
        } else {
          out += (is_do ? error() : message('C', cstr("SELECT 1"))) + message('Z', "I");
        }
        return;
      case 'd': case 'c': case 'f': return;   // outside a COPY: ignored, as the server does
      case 'S': skipping = false; out += message('Z', "I"); return;
      case 'X': return;
      default: break;
    }
    if (skipping) return;
    switch (m[0]) {
      case 'P': {
        // Parse: name, then the text.
        size_t name_end = body.find('\0');
        if (name_end == 0) unnamed_is_do = body.substr(1, 3) == "DO ";
        out += message('1', "");
        return;
      }
      case 'B': out += message('2', ""); return;
      case 'D': out += message('n', ""); return;
      case 'C': out += message('3', ""); return;
      case 'E':
        if (unnamed_is_do) {
          out += error();
          skipping = true;
        } else {
          out += message('C', cstr("SELECT 1"));
        }
        return;
      default: return;
    }
  }
};

// The messages of a whole stream of frontend messages.
std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t at = 0;
  while (s.size() - at >= 5) {
    uint32_t len = wire::read_u32(s.data() + at + 1);
    if (s.size() - at < len + 1) break;
    out.push_back(s.substr(at, len + 1));
    at += len + 1;
  }
  return out;
}

bool is_stand_in_text(std::string_view body) { return body.substr(0, 3) == "DO "; }

// The server got the client's messages in order, a stand-in in place of each held message the hold
// did not release, and nothing the client did not send otherwise.
// Returns how many stand-ins it found.
size_t check_server_stream(const std::vector<std::string>& client, const std::vector<std::string>& server) {
  size_t c = 0, stand_ins = 0;
  for (size_t i = 0; i < server.size(); ++i) {
    const std::string& m = server[i];
    if (c < client.size() && m == client[c]) {
      ++c;
      continue;
    }
    std::string_view body(m.data() + 5, m.size() - 5);
    if (m[0] == 'Q' && is_stand_in_text(body)) {
      check(c < client.size() && client[c][0] == 'Q');
      ++c;
      ++stand_ins;
      continue;
    }
    // An Execute's stand-in: Parse of the unnamed statement, Bind of the unnamed portal, Execute.
    check(m[0] == 'P' && body.size() > 1 && body[0] == '\0' && is_stand_in_text(body.substr(1)));
    check(i + 2 < server.size() && server[i + 1][0] == 'B' && server[i + 2][0] == 'E');
    check(c < client.size() && client[c][0] == 'E');
    ++c;
    ++stand_ins;
    i += 2;
  }
  return stand_ins;
}

std::shared_ptr<const predrop::policy::Config> load(uint16_t port) {
  std::string yaml =
      "upstream: 127.0.0.1:" + std::to_string(port) +
      "\nsnapshots:\n  hold_timeout_ms: 60000\nrules:\n"
      "  - {schema: skipped, action: skip}\n"
      "  - {schema: closed, on_failure: closed}\n"
      "  - {schema: q, action: quarantine}\n"
      "  - {schema: \"*\", action: snapshot}\n";
  auto r = predrop::policy::load_string(yaml, "fuzz_session");
  if (!r.config) {
    for (const auto& e : r.errors) std::fprintf(stderr, "%s\n", e.to_string().c_str());
    std::abort();
  }
  return r.config;
}

uint64_t endings() {
  uint64_t n = 0;
  for (const auto& e : metrics().hold_endings) n += e.load();
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = (spdlog::set_level(spdlog::level::off), true);
  (void)quiet;
  static asio::io_context io;
  static tcp::acceptor upstream(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  static ProxyContext ctx;
  static MemoryCapture* capture_seen = nullptr;
  static BufferPool pool(16384, 4);
  if (!capture_seen) {
    ctx.set_config(load(upstream.local_endpoint().port()));
    auto c = std::make_unique<MemoryCapture>();
    capture_seen = c.get();
    ctx.hold_capture = std::move(c);
  }
  MemoryCapture& cap = *capture_seen;
  cap.waiting.clear();
  cap.requests = 0;
  const uint64_t endings_before = endings();
  const uint64_t protocol_errors_before = metrics().protocol_errors.load();

  int pair[2];
  check(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair) == 0);
  const int client_fd = pair[0];
  tcp::socket session_side(io);
  session_side.assign(tcp::v4(), pair[1]);
  auto session = std::make_shared<Session>(ctx, std::move(session_side), pool);
  session->start();

  FakeServer server;
  std::string sent;   // every message the client sent after its startup packet
  bool client_open = true;
  auto pump = [&] {
    for (int quiet_rounds = 0; quiet_rounds < 2;) {
      io.restart();
      size_t ran = io.poll();
      if (server.fd < 0) {
        boost::system::error_code ec;
        upstream.non_blocking(true, ec);
        tcp::socket accepted(io);
        upstream.accept(accepted, ec);
        if (!ec) server.fd = accepted.release();
      }
      size_t before = server.received.size();
      if (server.fd >= 0) server.pump();
      if (client_fd >= 0) {
        char buf[8192];
        while (::recv(client_fd, buf, sizeof buf, MSG_DONTWAIT) > 0) {
        }
      }
      quiet_rounds = (ran == 0 && server.received.size() == before) ? quiet_rounds + 1 : 0;
    }
  };
  auto send_client = [&](const std::string& m) {
    if (!client_open) return;
    (void)::send(client_fd, m.data(), m.size(), MSG_NOSIGNAL);
    sent += m;
  };

  size_t i = 0;
  bool raw = false;   // the input sent bytes of its own: the session may end the connection
  // A first byte 0xE0..0xE2: an SSLRequest, a GSSENCRequest, or both, before the startup. Each gets
  // 'N' (no tls configured here), and the startup follows on the same connection.
  if (size > 0 && data[0] >= 0xE0 && data[0] <= 0xE2) {
    const uint8_t first = data[i++];
    std::vector<uint32_t> codes;
    if (first != 0xE0) codes.push_back(80877104);   // GSSENCRequest
    if (first != 0xE1) codes.push_back(80877103);   // SSLRequest
    for (uint32_t code : codes) {
      std::string req(8, '\0');
      wire::write_u32(req.data(), 8);
      wire::write_u32(req.data() + 4, code);
      (void)::send(client_fd, req.data(), req.size(), MSG_NOSIGNAL);
      char answer = 0;
      ssize_t got = 0;
      for (int spins = 0; spins < 1000 && got <= 0; ++spins) {
        io.restart();
        io.poll();
        got = ::recv(client_fd, &answer, 1, MSG_DONTWAIT);
      }
      check(got == 1 && answer == 'N');
    }
  }

  {
    std::string startup(8, '\0');
    wire::write_u32(startup.data() + 4, 3u << 16);
    startup += cstr("user") + cstr("fuzz") + cstr("database") + cstr("fuzz") + std::string(1, '\0');
    wire::write_u32(startup.data(), static_cast<uint32_t>(startup.size()));
    (void)::send(client_fd, startup.data(), startup.size(), MSG_NOSIGNAL);
    pump();
  }

  // A length byte, then up to that many of the input's bytes (fewer at its end); i < size.
  auto take_bytes = [&]() -> std::string_view {
    const size_t wanted = data[i++];  // taken before size - i is counted
    const size_t n = std::min(wanted, size - i);
    std::string_view bytes(reinterpret_cast<const char*>(data + i), n);
    i += n;
    return bytes;
  };
  while (i < size && client_open) {
    uint8_t op = data[i++];
    if ((op & 0xF0) == 0xF0) {
      switch (op & 3) {
        case 0: {   // COPY FROM STDIN with 0..3 CopyData, then CopyDone (bit 2: CopyFail)
          if (i >= size) break;
          const int rows = data[i++] % 4;
          std::string m = message('Q', cstr("COPY t FROM STDIN"));
          for (int r = 0; r < rows; ++r) m += message('d', std::to_string(r) + "\n");
          m += (op & 4) ? message('f', cstr("client gave up")) : message('c', "");
          send_client(m);
          break;
        }
        case 1: send_client(message('Q', cstr("COPY t TO STDOUT"))); break;
        case 2: {   // bytes of the input's own, as they are
          if (i >= size) break;
          send_client(std::string(take_bytes()));
          raw = true;
          break;
        }
        case 3: {   // a message of the input's type and body, framed right
          if (i + 1 >= size) break;
          const char type = static_cast<char>(data[i++]);
          send_client(message(type, take_bytes()));
          raw = true;
          break;
        }
      }
      continue;
    }
    switch (op & 7) {
      case 0: {   // a Query of one listed statement
        if (i >= size) break;
        send_client(message('Q', cstr(kStatements[data[i++] % std::size(kStatements)])));
        break;
      }
      case 1: {   // the same, extended: Parse, Bind, Execute, Sync (bit 3: no Sync yet)
        if (i >= size) break;
        const char* text = kStatements[data[i++] % std::size(kStatements)];
        send_client(message('P', cstr("") + cstr(text) + std::string(2, '\0')));
        send_client(message('B', cstr("") + cstr("") + std::string(6, '\0')));
        send_client(message('E', cstr("") + std::string(4, '\0')));
        if (!(op & 8)) send_client(message('S', ""));
        break;
      }
      case 2: {   // a Query of text of the input's own
        if (i >= size) break;
        std::string text(take_bytes());
        if (text.find('\0') != std::string::npos) break;
        send_client(message('Q', cstr(text)));
        break;
      }
      case 3: cap.answer(capture::SnapshotOutcome::written); break;
      case 4: cap.answer(capture::SnapshotOutcome::capture_error); break;
      case 5: cap.answer(capture::SnapshotOutcome::timeout); break;
      case 6: pump(); break;
      case 7:   // the client leaves (bit 3: after a Terminate)
        if (op & 8) send_client(message('X', ""));
        ::shutdown(client_fd, SHUT_WR);
        client_open = false;
        break;
    }
  }
  // Whatever still waits is answered: every hold ends.
  for (pump(); !cap.waiting.empty(); pump()) cap.answer(capture::SnapshotOutcome::written);
  // Whole, well-formed messages in protocol order: the session never finds fault with them, and it
  // is open until its client leaves.
  if (!raw) {
    check(metrics().protocol_errors.load() == protocol_errors_before);
    if (client_open) check(session->view().has_value());
  }
  check(endings() - endings_before >= cap.requests);
  const size_t stand_ins = raw ? 0 : check_server_stream(split(sent), split(server.received));
  // FUZZ_SESSION_TRACE=1 ./fuzz_session seed…: whether a seed reaches holds and stand-ins at all.
  static const bool trace = std::getenv("FUZZ_SESSION_TRACE") != nullptr;
  if (trace)
    std::fprintf(stderr, "capture requests %llu, holds ended %llu, client messages %zu, server messages %zu, stand-ins %zu\n",
                 static_cast<unsigned long long>(cap.requests), static_cast<unsigned long long>(endings() - endings_before),
                 split(sent).size(), split(server.received).size(), stand_ins);

  // The server resets the connection (a reset leaves no TIME_WAIT on either side: thousands of
  // runs a second would use up the loopback's ports), then the client leaves: the session closes and
  // lets go of everything.
  if (server.fd >= 0) {
    struct linger hard {1, 0};
    ::setsockopt(server.fd, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
    ::close(server.fd);
  }
  pump();
  ::close(client_fd);
  pump();
  std::weak_ptr<Session> gone = session;
  session.reset();
  pump();
  check(gone.expired());
  return 0;
}
