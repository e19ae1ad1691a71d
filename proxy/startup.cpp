// The startup phase: SSLRequest / GSSENCRequest / CancelRequest / StartupMessage, then the
// upstream connection (optionally TLS), after which authentication is simply relayed.
#include <spdlog/spdlog.h>

#include <sys/socket.h>
#include <unistd.h>

#include "proxy/console.hpp"
#include "proxy/metrics.hpp"
#include "proxy/session.hpp"

namespace predrop::proxy {

Session::Session(ProxyContext& ctx, tcp::socket client, BufferPool& pool)
    : ctx_(ctx), cfg_(ctx.config()), pool_(pool), client_(std::move(client)),
      id_(metrics().client_connections_total.fetch_add(1) + 1) {
  boost::system::error_code ec;
  auto ep = client_.socket().remote_endpoint(ec);
  if (!ec) client_addr_ = ep.address().to_string();
  client_.socket().set_option(tcp::no_delay(true), ec);
  metrics().client_connections.fetch_add(1);
}

Session::~Session() {
  metrics().client_connections.fetch_sub(1);
  if (upstream_) metrics().server_connections.fetch_sub(1);
}

void Session::start() {
  ctx_.registry.add(shared_from_this());
  registered_ = true;
  startup_timer_ = std::make_unique<asio::steady_timer>(executor());
  startup_timer_->expires_after(std::chrono::milliseconds(cfg_->limits.startup_timeout_ms));
  startup_timer_->async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (ec || self->state_.relaying() || self->state_.closed()) return;
    // PostgreSQL ends a startup that outlasts authentication_timeout without a word (the
    // postmaster's child just exits, TLS or not): the client sees the connection close, as here.
    spdlog::info("client {}: startup not finished within limits.startup_timeout_ms={}", self->client_addr_,
                 self->cfg_->limits.startup_timeout_ms);
    self->close("startup timeout");
  });
  detect_direct_tls();
}

// libpq 17's sslnegotiation=direct opens with a TLS ClientHello instead of an SSLRequest. Its first
// byte, 0x16 (a TLS handshake record), cannot begin a startup packet (as a length it would be
// hundreds of megabytes), so one peeked byte tells the two apart, as PostgreSQL 17 tells them.
void Session::detect_direct_tls() {
  client_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this()](boost::system::error_code ec) {
    if (ec) return self->close("client left during startup");
    unsigned char first = 0;
    ssize_t n = ::recv(self->client_.socket().native_handle(), &first, 1, MSG_PEEK);
    if (n <= 0) return self->close("client left during startup");
    if (first != 0x16) return self->read_startup_length();
    if (!self->ctx_.client_tls) {
      // PostgreSQL without SSL closes such a connection without a word: the client speaks TLS and
      // could not read a protocol error anyway.
      self->startup_protocol_error("direct TLS connection, but predrop has no tls configured");
      return self->close("direct TLS without tls configured");
    }
    self->start_direct_tls();
  });
}

void Session::start_direct_tls() {
  auto& tls = client_.enable_tls(*ctx_.client_tls);
  tls.async_handshake(asio::ssl::stream_base::server, [self = shared_from_this()](boost::system::error_code ec) {
    if (ec) {
      spdlog::info("client {}: direct TLS handshake failed: {}", self->client_addr_, ec.message());
      return self->close("TLS handshake failed");
    }
    // Direct TLS requires ALPN "postgresql" (PostgreSQL 17 refuses it otherwise, with nothing sent):
    // it is what keeps a PostgreSQL connection from being mistaken for another TLS protocol.
    const unsigned char* alpn = nullptr;
    unsigned int alpn_len = 0;
    SSL_get0_alpn_selected(self->client_.tls()->native_handle(), &alpn, &alpn_len);
    if (alpn_len == 0) {
      self->startup_protocol_error("received direct SSL connection request without ALPN protocol negotiation extension");
      return self->close("direct TLS without ALPN");
    }
    // As after an SSLRequest answered 'S': neither negotiation may follow inside TLS.
    self->negotiation_.tls_begun();
    self->read_startup_length();
  });
}

// A startup the server refuses is refused as the server refuses it. Where PostgreSQL only logs (a
// length out of range, a packet cut short) the connection closes without a word: a client that
// ends at once may send its Terminate before its startup packet, and an answer it does not expect
// makes it throw. Where the server answers from the packet alone (an unsupported protocol, a bad
// layout, no user), the packet goes to the server and its answer comes back byte for byte, in
// whatever format it chose (protocol 2 errors have no length word); a negotiation repeated, which
// the server cannot be sent, gets the server's refusal of a code it can (relay_renamed_refusal).
// predrop answers itself only for the negotiation it conducts: SSLRequest and GSSENCRequest once
// each, and bytes sent behind an SSLRequest.
void Session::read_startup_length() {
  auto len_buf = std::make_shared<std::array<char, 4>>();
  client_.async_read_exactly(asio::buffer(*len_buf), [self = shared_from_this(), len_buf](boost::system::error_code ec, size_t n) {
    if (ec) {
      // Nothing at all is an ordinary hang-up (monitors, a client refusing the SSL answer); the
      // server complains of part of a length word only before any negotiation.
      if (n > 0 && !self->negotiation_.negotiated()) self->startup_protocol_error("incomplete startup packet");
      return self->close_with_close_notify("client left during startup");
    }
    uint32_t len = wire::read_u32(len_buf->data());
    if (len < 8 || len - 4 > wire::kMaxStartupPacket) {
      self->startup_protocol_error("invalid length of startup packet: " + std::to_string(len));
      return self->close_with_close_notify("invalid length of startup packet");
    }
    self->read_startup_body(len);
  });
}

void Session::read_startup_body(uint32_t len) {
  auto packet = std::make_shared<std::string>(len, '\0');
  wire::write_u32(packet->data(), len);
  client_.async_read_exactly(asio::buffer(packet->data() + 4, len - 4),
                             [self = shared_from_this(), packet](boost::system::error_code ec, size_t) {
                               if (ec) {
                                 self->startup_protocol_error("incomplete startup packet");
                                 return self->close_with_close_notify("client left during startup");
                               }
                               self->on_startup_packet(std::move(*packet));
                             });
}

void Session::startup_protocol_error(const std::string& what) {
  metrics().protocol_errors_startup.fetch_add(1, std::memory_order_relaxed);
  spdlog::warn("client {}: {}", client_addr_, what);
}

namespace {
// The server's refusal of bytes sent behind an SSLRequest, before any TLS.
constexpr std::string_view kUnencryptedAfterSsl = "received unencrypted data after SSL request";
constexpr std::string_view kUnencryptedAfterSslDetail =
    "This could be either a client-software bug or evidence of an attempted man-in-the-middle attack.";

// A protocol code as the server writes it: major.minor.
std::string protocol_version(uint32_t code) { return std::to_string(code >> 16) + "." + std::to_string(code & 0xFFFF); }

// The server's words for a protocol code it does not speak.
std::string unsupported_protocol(uint32_t code) { return "unsupported frontend protocol " + protocol_version(code); }
}  // namespace

void Session::on_startup_packet(std::string packet) {
  uint32_t code = wire::read_u32(packet.data() + 4);
  // The server's order: a cancel first, then each negotiation once (any length).
  switch (negotiation_.on_packet(code)) {
    case StartupNegotiation::Step::cancel: return handle_cancel_packet(packet);
    case StartupNegotiation::Step::answer_ssl: return answer_ssl_request();
    // No GSSAPI encryption: 'N', and the client goes on with SSL or plaintext.
    case StartupNegotiation::Step::answer_gss: return answer_negotiation('N');
    case StartupNegotiation::Step::repeated:
      // The server reads the code as a protocol version it does not know. Sent this code, the server
      // would negotiate, so it is sent one it refuses in the same words, and its refusal comes back
      // naming this code (wire::kUnspokenProtocolCode).
      startup_protocol_error(unsupported_protocol(code) + " (a negotiation repeated): the server answers");
      startup_packet_.assign(8, '\0');
      wire::write_u32(startup_packet_.data(), 8);
      wire::write_u32(startup_packet_.data() + 4, wire::kUnspokenProtocolCode);
      server_answers_startup_ = true;
      return connect_upstream();
    case StartupNegotiation::Step::startup: break;
  }
  std::optional<wire::StartupParams> parsed;
  if ((code >> 16) == 3) parsed = wire::parse_startup(packet.data() + 4, packet.size() - 4);
  // The console stays open through a drain (an operator watches what it waits for) and does not
  // count against limits.max_clients.
  if (parsed && !parsed->get("user").empty() && asks_for_console(*parsed)) return start_console(std::move(*parsed));
  if (ctx_.draining.load()) return fail_startup("57P03", "predrop is shutting down");
  if (static_cast<int>(ctx_.registry.size()) > cfg_->limits.max_clients) {
    metrics().client_connections_rejected.fetch_add(1);
    return fail_startup("53300", "sorry, too many clients already (predrop limits.max_clients=" +
                                     std::to_string(cfg_->limits.max_clients) + ")");
  }
  if (!parsed || parsed->get("user").empty()) {
    std::string why = (code >> 16) != 3 ? unsupported_protocol(code)
                      : !parsed         ? "invalid startup packet layout"
                                        : "no user name in the startup packet";
    startup_protocol_error(why + ": the server answers");
    startup_packet_ = std::move(packet);
    server_answers_startup_ = true;
    return connect_upstream();
  }
  params_ = std::move(*parsed);
  startup_packet_ = std::move(packet);
  std::vector<std::string> initial = {"$user", "public"};
  std::string sp = params_.get("search_path");
  if (auto from_options = wire::setting_from_options(params_.get("options"), "search_path")) sp = *from_options;
  if (!sp.empty()) initial = parser::split_search_path(sp);
  // A role set at startup is the current user "$user" names until a SET ROLE or RESET ROLE.
  std::optional<std::string> role;
  if (!params_.get("role").empty()) role = params_.get("role");
  if (auto from_options = wire::setting_from_options(params_.get("options"), "role")) role = *from_options;
  decoder_.emplace(ctx_.classifier, std::move(initial), std::move(role));
  // Whether this session's shape changes get afters is fixed at its start (a SIGHUP turning
  // capture.after off still stops their capture: Session::capture_afters reads the policy).
  decoder_->transactions().enable(cfg_->after_capture && cfg_->snapshots_enabled && ctx_.capture != nullptr);
  decoder_->transactions().set_user(params_.get("user"));
  connect_upstream();
}

bool Session::asks_for_console(const wire::StartupParams& startup) const {
  if (cfg_->console_database.empty() || !startup.get("replication").empty()) return false;
  std::string database = startup.get("database");
  return (database.empty() ? startup.get("user") : database) == cfg_->console_database;
}

// The server authenticates a console user on its postgres database (predrop keeps no credentials);
// what follows the startup is proxy/console.cpp's.
void Session::start_console(wire::StartupParams startup) {
  state_.move_to(SessionPhase::console);
  ctx_.registry.set_console(this);
  bool named = false;
  for (auto& [key, value] : startup.params)
    if (key == "database") value = "postgres", named = true;
  if (!named) startup.params.emplace_back("database", "postgres");
  params_ = std::move(startup);
  startup_packet_ = wire::startup_packet(params_);
  connect_upstream();
}

// The server's answer to a startup it refuses, relayed as it comes until the server closes.
void Session::relay_server_refusal() {
  if (negotiation_.refused_code() != 0) return relay_renamed_refusal(std::make_shared<std::string>());
  auto buf = std::make_shared<std::array<char, 4096>>();
  upstream_->async_read_some(asio::buffer(*buf), [self = shared_from_this(), buf](boost::system::error_code ec, size_t n) {
    if (self->state_.closed()) return;
    if (n == 0) return self->close_with_close_notify("the server refused the startup");
    self->client_.async_write(asio::buffer(buf->data(), n), [self, buf](boost::system::error_code ec, size_t) {
      if (ec) return self->close("client left during startup");
      self->relay_server_refusal();
    });
  });
}

// The server's refusal of wire::kUnspokenProtocolCode, read whole (it closes after it), sent on as
// its refusal of the code the client repeated. An answer of another shape (an old server, a pooler
// upstream) leaves predrop to answer in the server's words itself.
void Session::relay_renamed_refusal(std::shared_ptr<std::string> reply) {
  static constexpr size_t kMaxRefusal = 4096;   // an ErrorResponse of a few fields
  // Read straight onto the end of the reply; one byte over the bound says it is not the refusal.
  const size_t have = reply->size();
  reply->resize(kMaxRefusal + 1);
  upstream_->async_read_some(asio::buffer(reply->data() + have, kMaxRefusal + 1 - have),
                             [self = shared_from_this(), reply, have](boost::system::error_code, size_t n) {
    if (self->state_.closed()) return;
    reply->resize(have + n);
    if (n > 0 && reply->size() <= kMaxRefusal) return self->relay_renamed_refusal(reply);
    uint32_t code = self->negotiation_.refused_code();
    auto renamed = wire::rename_refused_protocol(*reply, protocol_version(wire::kUnspokenProtocolCode), protocol_version(code));
    if (!renamed) {
      spdlog::warn("client {}: the server's refusal of protocol {} was not one ErrorResponse naming it ({} bytes); predrop answers",
                   self->client_addr_, protocol_version(wire::kUnspokenProtocolCode), reply->size());
      return self->fail_startup("0A000", unsupported_protocol(code) + ": server supports 3.0 to 3.0");
    }
    auto out = std::make_shared<std::string>(std::move(*renamed));
    self->client_.async_write(asio::buffer(*out), [self, out](boost::system::error_code, size_t) {
      self->close_with_close_notify("the server refused the startup");
    });
  });
}

void Session::answer_ssl_request() {
  // Bytes already sent behind the SSLRequest would be read as if they came through TLS:
  // the class of bug behind PgBouncer's CVE-2021-3935 and PostgreSQL's CVE-2021-23214.
  boost::system::error_code ec;
  char answer = ctx_.client_tls && !client_.is_tls() ? 'S' : 'N';
  if (size_t early = client_.socket().available(ec); early > 0) {
    metrics().protocol_errors_startup.fetch_add(1, std::memory_order_relaxed);   // fail_startup logs it
    // The server gives its answer to the request, then this error; after 'S' it first completes the
    // handshake (those bytes sit in its own buffer, out of TLS's way) and refuses through TLS.
    if (answer == 'N') return fail_startup("08P01", std::string(kUnencryptedAfterSsl), kUnencryptedAfterSslDetail, "N");
    std::string early_bytes(early, '\0');
    client_.socket().read_some(asio::buffer(early_bytes), ec);
    negotiation_.note_bytes_behind_ssl_request();
  }
  if (answer == 'S') negotiation_.tls_begun();   // as the server: no GSSENCRequest inside TLS
  answer_negotiation(answer);
}

// The one-byte answer to an SSLRequest or GSSENCRequest; after 'S' the TLS handshake, then the
// next packet either way.
void Session::answer_negotiation(char answer) {
  auto byte = std::make_shared<char>(answer);
  client_.async_write(asio::buffer(byte.get(), 1), [self = shared_from_this(), byte](boost::system::error_code ec, size_t) {
    if (ec) return self->close("client left during startup");
    if (*byte != 'S') return self->read_startup_length();
    auto& tls = self->client_.enable_tls(*self->ctx_.client_tls);
    tls.async_handshake(asio::ssl::stream_base::server, [self](boost::system::error_code ec) {
      if (ec) {
        spdlog::info("client {}: TLS handshake failed: {}", self->client_addr_, ec.message());
        return self->close("TLS handshake failed");
      }
      if (self->negotiation_.refuse_after_handshake()) {
        return self->fail_startup("08P01", std::string(kUnencryptedAfterSsl), kUnencryptedAfterSslDetail);
      }
      self->read_startup_length();
    });
  });
}

void Session::handle_cancel_packet(const std::string& packet) {
  metrics().cancel_requests.fetch_add(1);
  // The key is everything after the code: pid + secret (protocol 3.2 keys are longer).
  std::string key = packet.substr(8);
  auto target = ctx_.registry.find_by_key(key);
  if (!target) {
    spdlog::debug("cancel request for an unknown key from {}", client_addr_);
    return close("cancel request handled");
  }
  // The server closes a cancel connection only once it has signalled the backend, and libpq's
  // PQcancel waits for that close: keep this connection open until the cancel really landed,
  // or a late cancel would hit the client's next statement.
  auto self = shared_from_this();
  auto done = [self]() { asio::post(self->executor(), [self] { self->close("cancel request handled"); }); };
  asio::post(target->executor(), [target, packet, done]() { target->on_cancel_request(packet, done); });
}

void Session::fail_startup(std::string_view sqlstate, std::string message, std::string_view detail, std::string before) {
  if (state_.closed()) return;
  spdlog::info("client {}: {}", client_addr_, message);
  auto err = std::make_shared<std::string>(std::move(before) + wire::error_response("FATAL", sqlstate, message, detail));
  client_.async_write(asio::buffer(*err), [self = shared_from_this(), err](boost::system::error_code, size_t) {
    self->close_with_close_notify("startup failed");
  });
}

void Session::connect_upstream() {
  // The client's part of the startup is done: limits.startup_timeout_ms bounds the client only.
  // What follows is the server's (a refusal, TLS, authentication: authentication_timeout), and a
  // loaded server that answers late must still be heard, not cut off in silence.
  if (startup_timer_) startup_timer_->cancel();
  // A numeric upstream needs no resolver (asio runs getaddrinfo on a thread of its own: a
  // round trip to another thread and its allocations for every client).
  boost::system::error_code numeric_ec;
  auto numeric = asio::ip::make_address(cfg_->upstream.host, numeric_ec);
  if (!numeric_ec) {
    upstream_ = std::make_unique<Transport>(tcp::socket(executor()));
    metrics().server_connections.fetch_add(1);
    upstream_->socket().async_connect(tcp::endpoint(numeric, cfg_->upstream.port),
                                      [self = shared_from_this()](boost::system::error_code ec) { self->on_upstream_tcp(ec); });
    return;
  }
  auto resolver = std::make_shared<tcp::resolver>(executor());
  resolver->async_resolve(cfg_->upstream.host, std::to_string(cfg_->upstream.port),
                          [self = shared_from_this(), resolver](boost::system::error_code ec, tcp::resolver::results_type results) {
    if (ec) {
      return self->fail_startup("08006", "predrop: could not resolve upstream " + self->cfg_->upstream.to_string() + ": " + ec.message());
    }
    self->upstream_ = std::make_unique<Transport>(tcp::socket(self->executor()));
    metrics().server_connections.fetch_add(1);
    asio::async_connect(self->upstream_->socket(), results,
                        [self](boost::system::error_code ec, const tcp::endpoint&) { self->on_upstream_tcp(ec); });
  });
}

void Session::on_upstream_tcp(const boost::system::error_code& ec) {
  if (ec) return fail_startup("08006", "predrop: could not connect to upstream " + cfg_->upstream.to_string() + ": " + ec.message());
  boost::system::error_code ignored;
  upstream_->socket().set_option(tcp::no_delay(true), ignored);
  // The connect waited for writability, and asio then keeps EPOLLOUT registered for good: every
  // bare ACK from the server would wake the loop for nothing. Register the socket afresh, for reads.
  auto protocol = upstream_->socket().local_endpoint(ignored).protocol();
  if (!ignored) {
    auto fd = upstream_->socket().release(ignored);
    if (!ignored) {
      upstream_->socket().assign(protocol, fd, ignored);
      if (ignored) ::close(fd);
    }
    if (ignored) return fail_startup("08006", "predrop: could not register the upstream connection: " + ignored.message());
  }
  on_upstream_connected();
}

void Session::on_upstream_connected() {
  if (ctx_.upstream_tls && cfg_->upstream_tls.sslmode != "disable") return negotiate_upstream_tls();
  send_startup_upstream();
}

void Session::negotiate_upstream_tls() {
  auto req = std::make_shared<std::array<char, 9>>();
  wire::write_u32(req->data(), 8);
  wire::write_u32(req->data() + 4, wire::kSslRequestCode);
  upstream_->async_write(asio::buffer(req->data(), 8), [self = shared_from_this(), req](boost::system::error_code ec, size_t) {
    if (ec) return self->fail_startup("08006", "predrop: upstream closed during SSL negotiation");
    self->upstream_->async_read_exactly(asio::buffer(req->data() + 8, 1), [self, req](boost::system::error_code ec, size_t) {
      if (ec) return self->fail_startup("08006", "predrop: upstream closed during SSL negotiation");
      const auto& mode = self->cfg_->upstream_tls.sslmode;
      char answer = (*req)[8];
      if (answer != 'S') {
        if (mode == "prefer") return self->send_startup_upstream();
        return self->fail_startup("08006", "predrop: upstream " + self->cfg_->upstream.to_string() +
                                               " does not support SSL, but upstream_tls.sslmode=" + mode);
      }
      auto& tls = self->upstream_->enable_tls(*self->ctx_.upstream_tls);
      std::string host = self->cfg_->upstream_tls.server_name.empty() ? self->cfg_->upstream.host
                                                                      : self->cfg_->upstream_tls.server_name;
      SSL_set_tlsext_host_name(tls.native_handle(), host.c_str());
      if (mode == "verify-full") {
        tls.set_verify_mode(asio::ssl::verify_peer);
        tls.set_verify_callback(asio::ssl::host_name_verification(host));
      } else if (mode == "verify-ca") {
        tls.set_verify_mode(asio::ssl::verify_peer);
      } else {
        tls.set_verify_mode(asio::ssl::verify_none);
      }
      tls.async_handshake(asio::ssl::stream_base::client, [self, host](boost::system::error_code ec) {
        if (ec) {
          const auto& mode = self->cfg_->upstream_tls.sslmode;
          std::string checked = mode == "verify-full" ? " (upstream_tls.sslmode=verify-full, host name checked: '" + host + "')"
                                : mode == "verify-ca" ? " (upstream_tls.sslmode=verify-ca)"
                                                      : "";
          return self->fail_startup("08006", "predrop: TLS to upstream " + self->cfg_->upstream.to_string() +
                                                 " failed: " + ec.message() + checked);
        }
        // A plaintext client cannot bind SCRAM to a TLS channel it does not see.
        self->strip_plus_ = !self->client_.is_tls();
        self->send_startup_upstream();
      });
    });
  });
}

void Session::send_startup_upstream() {
  upstream_->async_write(asio::buffer(startup_packet_), [self = shared_from_this()](boost::system::error_code ec, size_t) {
    if (ec) return self->fail_startup("08006", "predrop: upstream closed the connection during startup");
    self->startup_packet_.clear();
    self->startup_packet_.shrink_to_fit();
    if (self->server_answers_startup_) return self->relay_server_refusal();
    if (self->state_.console()) {
      Session* s = self.get();
      self->console_handler_ = run_console(ConsoleLink{
          self, s->client_, *s->upstream_, s->executor(), s->ctx_, s->cfg_, s->params_.get("user"), s->client_addr_,
          s->strip_plus_, [s] { return s->state_.closed(); }, [s](std::string_view why) { s->close(why); },
          [s](const char* why) { s->close_with_close_notify(why); }});
      return;
    }
    self->start_relay();
  });
}

}  // namespace predrop::proxy
