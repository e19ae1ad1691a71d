// A blocking PostgreSQL v3 wire client for protocol tests: it sends exactly the bytes it is given
// and reads whole backend messages, so the same byte sequences can be played to PostgreSQL and to
// predrop and the replies compared byte for byte.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ptest {

using namespace std::chrono_literals;
using Ms = std::chrono::milliseconds;

// ---------------------------------------------------------------------------------------------
// Message builders (frontend). Every function returns the whole message, header included.
namespace msg {

std::string u32(uint32_t v);
std::string u16(uint16_t v);
std::string cstr(std::string_view s);   // s + '\0'
// type byte + Int32 length (covering itself and body) + body.
std::string frame(char type, std::string_view body);

using Params = std::vector<std::pair<std::string, std::string>>;
// StartupMessage with the given protocol (3.0 by default) and parameters.
std::string startup(const Params& params, uint32_t protocol = 3u << 16);
std::string ssl_request();
std::string gssenc_request();
// CancelRequest; key is the BackendKeyData body (pid + secret) as received.
std::string cancel_request(std::string_view key);

std::string query(std::string_view sql);
std::string parse(std::string_view name, std::string_view sql, const std::vector<uint32_t>& param_types = {});
// Text-format parameters (nullopt = NULL), text results.
std::string bind(std::string_view portal, std::string_view stmt, const std::vector<std::optional<std::string>>& params = {});
std::string describe(char what, std::string_view name);   // what: 'S' or 'P'
std::string execute(std::string_view portal, uint32_t max_rows = 0);
std::string close(char what, std::string_view name);      // what: 'S' or 'P'
std::string sync();
std::string flush();
std::string copy_data(std::string_view data);
std::string copy_done();
std::string copy_fail(std::string_view why);
std::string terminate();

}  // namespace msg

// ---------------------------------------------------------------------------------------------
// A backend message as read off the wire.
struct Message {
  char type = 0;
  std::string body;   // after the length word

  std::string raw() const;                  // type + length + body, as on the wire
  std::string describe(size_t max_body = 160) const;
};

// Fields of an ErrorResponse/NoticeResponse body, by field code.
struct ErrorInfo {
  std::string severity, sqlstate, message;
};
ErrorInfo parse_error(const Message& m);

// ---------------------------------------------------------------------------------------------
// Environment of the test run.
struct Env {
  std::string pghost = "127.0.0.1";
  uint16_t pgport = 5432;
  std::string pguser = "postgres";
  std::string pgdatabase = "postgres";
  std::string predrop_bin;
  std::string workdir;   // for logs and generated files
};
// Reads PGHOST/PGPORT/PGUSER/PGDATABASE/PREDROP_BIN/PREDROP_TEST_WORKDIR; error text when something is missing.
const Env& env();
std::string env_problem();   // empty when the environment is usable

// The standard startup parameters of the tests.
msg::Params default_params(std::string application_name = "ptest");

// ---------------------------------------------------------------------------------------------
class RawConn {
 public:
  RawConn() = default;
  RawConn(RawConn&& o) noexcept;
  RawConn& operator=(RawConn&& o) noexcept;
  RawConn(const RawConn&) = delete;
  RawConn& operator=(const RawConn&) = delete;
  ~RawConn();

  // Connects to host:port (TCP_NODELAY on). False (and errno text in last_error()) on failure.
  bool connect(const std::string& host, uint16_t port, Ms timeout = 5000ms);
  static RawConn to(uint16_t port, const std::string& host = "127.0.0.1");

  bool is_open() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  const std::string& last_error() const { return error_; }

  // Sends all bytes in one write() loop; incoming bytes are buffered meanwhile (no deadlock on
  // big pipelines). False when the connection broke.
  bool send(std::string_view bytes);
  // Sends the bytes in pieces of `chunk` with a pause between them (many small TCP segments).
  bool send_slowly(std::string_view bytes, size_t chunk, Ms pause);

  // Next whole backend message, or nullopt on timeout / EOF (see eof()).
  std::optional<Message> read_message(Ms timeout = 10000ms);
  // One raw byte (SSLRequest/GSSENCRequest answers), nullopt on timeout/EOF.
  std::optional<char> read_byte(Ms timeout = 5000ms);
  // Reads messages until one of type `until` has been seen `count` times (inclusive). On
  // timeout/EOF returns what was read and sets *complete=false.
  std::vector<Message> read_until(char until, int count = 1, Ms timeout = 20000ms, bool* complete = nullptr);
  // True when the peer closed (EOF or reset) within the timeout, after discarding any bytes.
  bool wait_closed(Ms timeout = 5000ms);
  bool eof() const { return eof_; }
  size_t buffered() const { return rbuf_.size() - rpos_; }

  // Startup with the given packet; reads through ReadyForQuery. Returns all messages read, sets
  // key (BackendKeyData body) and ok (ReadyForQuery seen without ErrorResponse).
  struct StartupResult {
    bool ok = false;
    std::string key;
    std::vector<Message> messages;
    std::optional<ErrorInfo> error;
  };
  StartupResult startup(const msg::Params& params = default_params(), Ms timeout = 10000ms);
  uint32_t backend_pid(const StartupResult& r) const;

  // Simple query convenience: rows as text (NULL as nullopt) of the last result set, and the
  // first error if any. Reads through ReadyForQuery.
  struct QueryResult {
    std::vector<std::vector<std::optional<std::string>>> rows;
    std::optional<ErrorInfo> error;
    bool complete = false;
    std::vector<Message> messages;
  };
  QueryResult simple_query(std::string_view sql, Ms timeout = 20000ms);

  void close();   // orderly close (FIN)
  void abort();   // RST: SO_LINGER 0 then close

 private:
  bool fill(Ms timeout);   // reads once; false on timeout/EOF
  int fd_ = -1;
  bool eof_ = false;
  std::string error_;
  std::string rbuf_;
  size_t rpos_ = 0;
};

// A direct connection to the test PostgreSQL for administrative queries (pg_stat_activity and
// the like). Throws std::runtime_error when it cannot connect.
RawConn direct_admin(std::string application_name = "ptest-admin");

// Escapes bytes for test messages.
std::string printable(std::string_view s, size_t max = 200);

}  // namespace ptest
