#include "raw_client.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace ptest {

using Clock = std::chrono::steady_clock;

namespace msg {

std::string u32(uint32_t v) {
  std::string s(4, '\0');
  s[0] = static_cast<char>(v >> 24);
  s[1] = static_cast<char>(v >> 16);
  s[2] = static_cast<char>(v >> 8);
  s[3] = static_cast<char>(v);
  return s;
}
std::string u16(uint16_t v) {
  std::string s(2, '\0');
  s[0] = static_cast<char>(v >> 8);
  s[1] = static_cast<char>(v);
  return s;
}
std::string cstr(std::string_view s) {
  std::string out(s);
  out.push_back('\0');
  return out;
}
std::string frame(char type, std::string_view body) {
  std::string out(1, type);
  out += u32(static_cast<uint32_t>(body.size() + 4));
  out.append(body);
  return out;
}

std::string startup(const Params& params, uint32_t protocol) {
  std::string body = u32(protocol);
  for (const auto& [k, v] : params) body += cstr(k) + cstr(v);
  body.push_back('\0');
  return u32(static_cast<uint32_t>(body.size() + 4)) + body;
}
std::string ssl_request() { return u32(8) + u32(80877103); }
std::string gssenc_request() { return u32(8) + u32(80877104); }
std::string cancel_request(std::string_view key) {
  return u32(static_cast<uint32_t>(8 + key.size())) + u32(80877102) + std::string(key);
}

std::string query(std::string_view sql) { return frame('Q', cstr(sql)); }
std::string parse(std::string_view name, std::string_view sql, const std::vector<uint32_t>& types) {
  std::string body = cstr(name) + cstr(sql) + u16(static_cast<uint16_t>(types.size()));
  for (auto t : types) body += u32(t);
  return frame('P', body);
}
std::string bind(std::string_view portal, std::string_view stmt, const std::vector<std::optional<std::string>>& params) {
  std::string body = cstr(portal) + cstr(stmt);
  body += u16(0);   // all parameters text
  body += u16(static_cast<uint16_t>(params.size()));
  for (const auto& p : params) {
    if (!p) {
      body += u32(0xFFFFFFFFu);
    } else {
      body += u32(static_cast<uint32_t>(p->size()));
      body += *p;
    }
  }
  body += u16(0);   // all results text
  return frame('B', body);
}
std::string describe(char what, std::string_view name) { return frame('D', std::string(1, what) + cstr(name)); }
std::string execute(std::string_view portal, uint32_t max_rows) { return frame('E', cstr(portal) + u32(max_rows)); }
std::string close(char what, std::string_view name) { return frame('C', std::string(1, what) + cstr(name)); }
std::string sync() { return frame('S', ""); }
std::string flush() { return frame('H', ""); }
std::string copy_data(std::string_view data) { return frame('d', data); }
std::string copy_done() { return frame('c', ""); }
std::string copy_fail(std::string_view why) { return frame('f', cstr(why)); }
std::string terminate() { return frame('X', ""); }

}  // namespace msg

std::string Message::raw() const {
  std::string out(1, type);
  out += msg::u32(static_cast<uint32_t>(body.size() + 4));
  out += body;
  return out;
}

std::string printable(std::string_view s, size_t max) {
  std::string out;
  static const char* hex = "0123456789abcdef";
  for (size_t i = 0; i < s.size() && i < max; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      out += "\\x";
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
  if (s.size() > max) out += "...(" + std::to_string(s.size()) + " bytes)";
  return out;
}

std::string Message::describe(size_t max_body) const {
  std::string t = type >= 0x20 && type < 0x7f ? std::string(1, type) : printable(std::string_view(&type, 1));
  return "'" + t + "' len=" + std::to_string(body.size() + 4) + " body=" + printable(body, max_body);
}

ErrorInfo parse_error(const Message& m) {
  ErrorInfo e;
  size_t pos = 0;
  const std::string& b = m.body;
  while (pos < b.size() && b[pos] != '\0') {
    char code = b[pos++];
    size_t nul = b.find('\0', pos);
    if (nul == std::string::npos) break;
    std::string v = b.substr(pos, nul - pos);
    if (code == 'V' || (code == 'S' && e.severity.empty())) e.severity = v;
    else if (code == 'C') e.sqlstate = v;
    else if (code == 'M') e.message = v;
    pos = nul + 1;
  }
  return e;
}

namespace {
std::string getenv_or(const char* k, const char* def) {
  const char* v = std::getenv(k);
  return v && *v ? v : def;
}
}  // namespace

const Env& env() {
  static Env e = [] {
    Env x;
    x.pghost = getenv_or("PGHOST", "127.0.0.1");
    x.pgport = static_cast<uint16_t>(std::atoi(getenv_or("PGPORT", "5432").c_str()));
    x.pguser = getenv_or("PGUSER", "postgres");
    x.pgdatabase = getenv_or("PGDATABASE", "postgres");
    x.predrop_bin = getenv_or("PREDROP_BIN", "");
    x.workdir = getenv_or("PREDROP_TEST_WORKDIR", "/tmp");
    return x;
  }();
  return e;
}

std::string env_problem() {
  if (!std::getenv("PGPORT")) return "PGPORT is not set: run under scripts/test.sh (make test) or source a pg-cluster env";
  if (env().predrop_bin.empty()) return "PREDROP_BIN is not set: run through ctest";
  if (access(env().predrop_bin.c_str(), X_OK) != 0) return "PREDROP_BIN=" + env().predrop_bin + " is not executable";
  return {};
}

msg::Params default_params(std::string application_name) {
  return {{"user", env().pguser}, {"database", env().pgdatabase}, {"application_name", std::move(application_name)}};
}

// ---------------------------------------------------------------------------------------------

RawConn::RawConn(RawConn&& o) noexcept { *this = std::move(o); }
RawConn& RawConn::operator=(RawConn&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    o.fd_ = -1;
    eof_ = o.eof_;
    error_ = std::move(o.error_);
    rbuf_ = std::move(o.rbuf_);
    rpos_ = o.rpos_;
    o.rpos_ = 0;
  }
  return *this;
}
RawConn::~RawConn() { close(); }

bool RawConn::connect(const std::string& host, uint16_t port, Ms timeout) {
  close();
  eof_ = false;
  rbuf_.clear();
  rpos_ = 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || !res) {
      error_ = "cannot resolve " + host;
      return false;
    }
    addr.sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
    freeaddrinfo(res);
  }
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    error_ = std::string("socket: ") + std::strerror(errno);
    return false;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  if (rc != 0 && errno != EINPROGRESS) {
    error_ = std::string("connect: ") + std::strerror(errno);
    ::close(fd);
    return false;
  }
  if (rc != 0) {
    pollfd p{fd, POLLOUT, 0};
    int n = ::poll(&p, 1, static_cast<int>(timeout.count()));
    if (n <= 0) {
      error_ = "connect: timeout";
      ::close(fd);
      return false;
    }
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      error_ = std::string("connect: ") + std::strerror(err);
      ::close(fd);
      return false;
    }
  }
  fd_ = fd;
  return true;
}

RawConn RawConn::to(uint16_t port, const std::string& host) {
  RawConn c;
  if (!c.connect(host, port)) throw std::runtime_error("connect to " + host + ":" + std::to_string(port) + ": " + c.last_error());
  return c;
}

bool RawConn::send(std::string_view bytes) {
  if (fd_ < 0) return false;
  size_t off = 0;
  auto deadline = Clock::now() + 60s;
  while (off < bytes.size()) {
    ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      error_ = std::string("send: ") + std::strerror(errno);
      return false;
    }
    if (Clock::now() > deadline) {
      error_ = "send: stuck for 60 s";
      return false;
    }
    // Wait for room; read whatever the peer says meanwhile so neither side blocks the other.
    pollfd p{fd_, static_cast<short>(POLLOUT | (eof_ ? 0 : POLLIN)), 0};
    ::poll(&p, 1, 1000);
    if ((p.revents & POLLIN) && !eof_) {
      char tmp[65536];
      ssize_t r = ::recv(fd_, tmp, sizeof tmp, 0);
      if (r > 0) rbuf_.append(tmp, static_cast<size_t>(r));
      else if (r == 0) eof_ = true;
    }
  }
  return true;
}

bool RawConn::send_slowly(std::string_view bytes, size_t chunk, Ms pause) {
  for (size_t off = 0; off < bytes.size(); off += chunk) {
    if (!send(bytes.substr(off, chunk))) return false;
    if (off + chunk < bytes.size()) std::this_thread::sleep_for(pause);
  }
  return true;
}

bool RawConn::fill(Ms timeout) {
  if (fd_ < 0) eof_ = true;   // never connected or closed by us: nothing will ever arrive
  if (eof_) return false;
  if (rpos_ > 0 && rpos_ == rbuf_.size()) {
    rbuf_.clear();
    rpos_ = 0;
  } else if (rpos_ > (1u << 20)) {
    rbuf_.erase(0, rpos_);
    rpos_ = 0;
  }
  pollfd p{fd_, POLLIN, 0};
  int n = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, timeout.count())));
  if (n <= 0) return false;
  char tmp[65536];
  ssize_t r = ::recv(fd_, tmp, sizeof tmp, 0);
  if (r > 0) {
    rbuf_.append(tmp, static_cast<size_t>(r));
    return true;
  }
  if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
    if (r < 0) error_ = std::string("recv: ") + std::strerror(errno);
    eof_ = true;
    return false;
  }
  return true;   // spurious wakeup
}

std::optional<Message> RawConn::read_message(Ms timeout) {
  auto deadline = Clock::now() + timeout;
  for (;;) {
    size_t avail = rbuf_.size() - rpos_;
    if (avail >= 5) {
      const unsigned char* h = reinterpret_cast<const unsigned char*>(rbuf_.data() + rpos_);
      uint32_t len = (uint32_t(h[1]) << 24) | (uint32_t(h[2]) << 16) | (uint32_t(h[3]) << 8) | h[4];
      if (len < 4) {
        error_ = "backend message with length " + std::to_string(len);
        eof_ = true;
        return std::nullopt;
      }
      if (avail >= size_t(len) + 1) {
        Message m;
        m.type = rbuf_[rpos_];
        m.body.assign(rbuf_, rpos_ + 5, len - 4);
        rpos_ += size_t(len) + 1;
        return m;
      }
    }
    if (eof_) return std::nullopt;
    auto left = std::chrono::duration_cast<Ms>(deadline - Clock::now());
    if (left.count() < 0) return std::nullopt;
    if (!fill(left) && (eof_ || Clock::now() >= deadline)) return std::nullopt;
  }
}

std::optional<char> RawConn::read_byte(Ms timeout) {
  auto deadline = Clock::now() + timeout;
  while (rbuf_.size() == rpos_) {
    auto left = std::chrono::duration_cast<Ms>(deadline - Clock::now());
    if (!fill(std::max(left, Ms(0))) && (eof_ || Clock::now() >= deadline)) return std::nullopt;
  }
  return rbuf_[rpos_++];
}

std::vector<Message> RawConn::read_until(char until, int count, Ms timeout, bool* complete) {
  std::vector<Message> out;
  auto deadline = Clock::now() + timeout;
  int seen = 0;
  if (complete) *complete = false;
  while (seen < count) {
    auto left = std::chrono::duration_cast<Ms>(deadline - Clock::now());
    if (left.count() < 0) break;
    auto m = read_message(left);
    if (!m) break;
    if (m->type == until) ++seen;
    out.push_back(std::move(*m));
  }
  if (complete) *complete = seen >= count;
  return out;
}

bool RawConn::wait_closed(Ms timeout) {
  auto deadline = Clock::now() + timeout;
  while (!eof_) {
    rbuf_.clear();
    rpos_ = 0;
    auto left = std::chrono::duration_cast<Ms>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    fill(left);
  }
  return true;
}

RawConn::StartupResult RawConn::startup(const msg::Params& params, Ms timeout) {
  StartupResult r;
  if (!send(msg::startup(params))) return r;
  bool complete = false;
  r.messages = read_until('Z', 1, timeout, &complete);
  for (const auto& m : r.messages) {
    if (m.type == 'K') r.key = m.body;
    if (m.type == 'E' && !r.error) r.error = parse_error(m);
  }
  r.ok = complete && !r.error;
  return r;
}

uint32_t RawConn::backend_pid(const StartupResult& r) const {
  if (r.key.size() < 4) return 0;
  const unsigned char* h = reinterpret_cast<const unsigned char*>(r.key.data());
  return (uint32_t(h[0]) << 24) | (uint32_t(h[1]) << 16) | (uint32_t(h[2]) << 8) | h[3];
}

RawConn::QueryResult RawConn::simple_query(std::string_view sql, Ms timeout) {
  QueryResult q;
  if (!send(msg::query(sql))) return q;
  q.messages = read_until('Z', 1, timeout, &q.complete);
  for (const auto& m : q.messages) {
    if (m.type == 'T') q.rows.clear();
    if (m.type == 'E' && !q.error) q.error = parse_error(m);
    if (m.type == 'D') {
      const std::string& b = m.body;
      std::vector<std::optional<std::string>> row;
      if (b.size() < 2) continue;
      size_t n = (size_t(uint8_t(b[0])) << 8) | uint8_t(b[1]);
      size_t pos = 2;
      for (size_t i = 0; i < n && pos + 4 <= b.size(); ++i) {
        const unsigned char* h = reinterpret_cast<const unsigned char*>(b.data() + pos);
        uint32_t len = (uint32_t(h[0]) << 24) | (uint32_t(h[1]) << 16) | (uint32_t(h[2]) << 8) | h[3];
        pos += 4;
        if (len == 0xFFFFFFFFu) {
          row.emplace_back(std::nullopt);
        } else {
          row.emplace_back(b.substr(pos, len));
          pos += len;
        }
      }
      q.rows.push_back(std::move(row));
    }
  }
  return q;
}

void RawConn::close() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

void RawConn::abort() {
  if (fd_ >= 0) {
    linger l{1, 0};
    setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    ::close(fd_);
    fd_ = -1;
  }
}

RawConn direct_admin(std::string application_name) {
  RawConn c = RawConn::to(env().pgport, env().pghost);
  auto r = c.startup(default_params(std::move(application_name)));
  if (!r.ok) throw std::runtime_error("direct startup failed: " + (r.error ? r.error->message : c.last_error()));
  return c;
}

}  // namespace ptest
