// The console (proxy/console.hpp). Three phases on the session's two sockets:
//   authenticating: the server's requests and the client's answers relayed one for one, as the
//                   relay would (SCRAM's -PLUS struck for a plaintext client, as relay.cpp does);
//   admitting:      at the server's ReadyForQuery, one query on that connection says whether the
//                   user is a member of console.role; then the server connection ends;
//   commands:       one simple-protocol Query at a time, answered here.
// Buffers are bounded: a message over its bound ends the connection with the server's 08P01.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <deque>
#include <mutex>
#include <thread>

#include "proxy/admin.hpp"
#include "proxy/console.hpp"
#include "proxy/console_command.hpp"
#include "proxy/session.hpp"

namespace predrop::proxy {

namespace {

// Authentication messages are small (a GSSAPI token is the largest), console commands are one line.
constexpr size_t kMaxAuthMessage = 64 * 1024;
constexpr size_t kMaxCommand = 64 * 1024;

constexpr const char* kCommandList =
    "SHOW HOLDS, SHOW SESSIONS, SHOW STATS, SHOW CONFIG, SHOW QUARANTINE [database], SHOW SNAPSHOTS [schema.table], "
    "SHOW AGES [database [schema]], RELOAD, UNDROP schema.table [AS name] [IN database]";

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// /metrics, one row per sample.
ConsoleReply stats_reply(ProxyContext& ctx) {
  ConsoleReply r;
  r.columns = {"stat", "value"};
  std::string text = render_metrics(ctx);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    std::string_view line(text.data() + pos, nl - pos);
    pos = nl + 1;
    if (line.empty() || line.front() == '#') continue;
    size_t space = line.rfind(' ');
    if (space == std::string_view::npos) continue;
    r.rows.push_back({std::string(line.substr(0, space)), std::string(line.substr(space + 1))});
  }
  return r;
}

ConsoleReply config_reply(const policy::Config& config) {
  ConsoleReply r;
  r.columns = {"key", "value", "reload"};
  for (auto& v : policy::config_values(config))
    r.rows.push_back({std::move(v.key), std::move(v.value),
                      std::string(v.reload == policy::ReloadBehaviour::sighup ? "sighup" : "restart")});
  return r;
}

}  // namespace

class Console : public std::enable_shared_from_this<Console> {
 public:
  explicit Console(ConsoleLink link) : link_(std::move(link)), ctx_(link_.ctx), cfg_(link_.cfg), user_(link_.user) {}

  void start() {
    // The server ends an authentication that outlasts its authentication_timeout, but a console
    // waiting on the client's answer would not see that: the console bounds it too.
    auth_timer_ = std::make_unique<asio::steady_timer>(link_.executor);
    auth_timer_->expires_after(std::chrono::milliseconds(cfg_->limits.startup_timeout_ms) + std::chrono::seconds(60));
    auth_timer_->async_wait([weak = weak_from_this()](boost::system::error_code ec) {
      auto self = weak.lock();
      if (ec || !self || self->phase_ == Phase::commands) return;
      spdlog::info("console {}: authentication not finished in time", self->link_.client_addr);
      self->link_.close("console authentication timeout");
    });
    read_server();
  }

  void terminate_admin_shutdown() {
    if (link_.closed()) return;
    if (phase_ != Phase::commands) return link_.close("shutdown");
    send(wire::error_response("FATAL", "57P01", "terminating connection due to administrator command (predrop shutting down)"));
    close_after_send("shutdown");
  }

 private:
  enum class Phase { authenticating, admitting, commands };
  using OnMessage = std::function<void(char type, std::string whole)>;

  // One whole message (header included) from `from`; on EOF or an error the console ends.
  void read_message(Transport& from, size_t max, OnMessage next) {
    auto whole = std::make_shared<std::string>(wire::kHeaderLen, '\0');
    from.async_read_exactly(asio::buffer(*whole), [self = shared_from_this(), &from, max, whole,
                                                   next = std::move(next)](boost::system::error_code ec, size_t) mutable {
      if (self->link_.closed()) return;
      if (ec) return self->link_.close(&from == &self->link_.server ? "the server left" : "client left");
      uint32_t len = wire::read_u32(whole->data() + 1);
      if (len < 4 || len - 4 > max) {
        if (&from == &self->link_.server) return self->link_.close("the server sent a message out of bounds");
        self->send(wire::error_response("FATAL", "08P01", "invalid message length"));
        return self->close_after_send("console message out of bounds");
      }
      whole->resize(wire::kHeaderLen + len - 4);
      from.async_read_exactly(asio::buffer(whole->data() + wire::kHeaderLen, len - 4),
                              [self, whole, next = std::move(next), &from](boost::system::error_code ec, size_t) {
        if (self->link_.closed()) return;
        if (ec) return self->link_.close(&from == &self->link_.server ? "the server left" : "client left");
        char type = (*whole)[0];   // before the move: arguments are evaluated in no set order
        next(type, std::move(*whole));
      });
    });
  }

  // ---- authenticating: the server's requests, the client's answers ----

  void read_server() {
    read_message(link_.server, kMaxAuthMessage,
                 [self = shared_from_this()](char type, std::string msg) { self->on_server_message(type, std::move(msg)); });
  }

  void on_server_message(char type, std::string msg) {
    switch (type) {
      case 'R': {
        if (msg.size() < wire::kHeaderLen + 4) return link_.close("the server sent a short authentication request");
        uint32_t code = wire::read_u32(msg.data() + wire::kHeaderLen);
        if (code == 10 && link_.strip_scram_plus) msg.resize(wire::strip_scram_plus(msg.data(), msg.size()));
        send(std::move(msg));
        if (code == 0) authenticated_ = true;
        if (code == 0 || code == 12) return read_server();   // AuthenticationOk, SASLFinal: nothing to answer
        return read_client_answer();
      }
      case 'E':   // a refusal (password, pg_hba.conf, no such role): the server's own words
        send(std::move(msg));
        return close_after_send("the server refused the console's authentication");
      case 'S':
      case 'N':
        if (!authenticated_) {
          send(std::move(msg));
        } else {
          admitted_greeting_ += msg;   // the client sees them once it is admitted
        }
        return read_server();
      case 'K':   // the console has no backend to cancel
        return read_server();
      case 'v':
        send(std::move(msg));
        return read_server();
      case 'Z':
        if (!authenticated_) return link_.close("the server was ready before authenticating");
        return check_membership();
      default:
        spdlog::warn("console {}: the server sent message type '{}' during authentication", link_.client_addr, type);
        return link_.close("unexpected message from the server during authentication");
    }
  }

  void read_client_answer() {
    read_message(link_.client, kMaxAuthMessage, [self = shared_from_this()](char type, std::string msg) {
      if (type == 'X') return self->link_.close("client left during authentication");
      if (type != 'p') {
        // The server's words for anything but an answer here.
        self->send(wire::error_response("FATAL", "08P01",
                                        "expected password response, got message type " + std::to_string(static_cast<int>(type))));
        return self->close_after_send("client sent no password response");
      }
      auto out = std::make_shared<std::string>(std::move(msg));
      self->link_.server.async_write(asio::buffer(*out), [self, out](boost::system::error_code ec, size_t) {
        if (ec) return self->link_.close("the server left during authentication");
        self->read_server();
      });
    });
  }

  // ---- admitting ----

  void check_membership() {
    phase_ = Phase::admitting;
    const auto& users = cfg_->console_users;
    if (std::find(users.begin(), users.end(), user_) != users.end()) return admit("listed in console.users");
    if (cfg_->console_role.empty()) return refuse();
    std::string sql = "SELECT pg_catalog.pg_has_role(current_user, r.oid, 'MEMBER') FROM pg_catalog.pg_roles r WHERE r.rolname = " +
                      wire::e_literal(cfg_->console_role);
    auto out = std::make_shared<std::string>();
    wire::append_message(*out, 'Q', std::string_view(sql.c_str(), sql.size() + 1));
    link_.server.async_write(asio::buffer(*out), [self = shared_from_this(), out](boost::system::error_code ec, size_t) {
      if (ec) return self->link_.close("the server left before the console's membership check");
      self->read_membership();
    });
  }

  void read_membership() {
    read_message(link_.server, kMaxAuthMessage, [self = shared_from_this()](char type, std::string msg) {
      if (type == 'D' && msg.size() >= wire::kHeaderLen + 2 + 4 + 1) {
        self->member_ = wire::read_u32(msg.data() + wire::kHeaderLen + 2) == 1 && msg[wire::kHeaderLen + 6] == 't';
      } else if (type == 'E') {
        auto f = wire::parse_error_fields(msg.data() + wire::kHeaderLen, msg.size() - wire::kHeaderLen);
        self->membership_error_ = f.sqlstate + " " + f.message;
      } else if (type == 'Z') {
        if (!self->membership_error_.empty()) {
          spdlog::warn("console {}: the membership check of user {} failed: {}", self->link_.client_addr, self->user_,
                       self->membership_error_);
        }
        if (self->member_) return self->admit("a member of role " + self->cfg_->console_role);
        return self->refuse();
      }
      self->read_membership();
    });
  }

  // The server connection served only to authenticate: end it as a client would.
  void end_upstream() {
    auto bye = std::make_shared<std::string>();
    wire::append_message(*bye, 'X', {});
    link_.server.async_write(asio::buffer(*bye), [self = shared_from_this(), bye](boost::system::error_code, size_t) {
      self->link_.server.close();
    });
  }

  void admit(const std::string& why) {
    end_upstream();
    auth_timer_->cancel();
    spdlog::info("console: user {} from {} entered ({})", user_, link_.client_addr, why);
    phase_ = Phase::commands;
    send(std::move(admitted_greeting_) + wire::ready_for_query('I'));
    read_command();
  }

  void refuse() {
    end_upstream();
    spdlog::warn("console: user {} from {} refused: not a member of role \"{}\" nor listed in console.users", user_,
                 link_.client_addr, cfg_->console_role);
    std::string detail = cfg_->console_role.empty()
                             ? "Only the users in console.users may connect to the predrop console."
                             : "Only members of role \"" + cfg_->console_role + "\" and the users in console.users may connect to the predrop console.";
    send(wire::error_response("FATAL", "42501", "permission denied for the predrop console \"" + cfg_->console_database + "\"",
                              detail));
    close_after_send("not admitted to the console");
  }

  // ---- commands ----

  void read_command() {
    read_message(link_.client, kMaxCommand, [self = shared_from_this()](char type, std::string msg) {
      self->on_client_message(type, std::move(msg));
    });
  }

  void on_client_message(char type, std::string msg) {
    switch (type) {
      case 'Q': {
        skipping_to_sync_ = false;
        size_t body = msg.size() - wire::kHeaderLen;
        std::string text(msg.data() + wire::kHeaderLen, body > 0 && msg.back() == '\0' ? body - 1 : body);
        return run_command(text);
      }
      case 'X':
        return link_.close("client terminated the console");
      case 'S':
        skipping_to_sync_ = false;
        send(wire::ready_for_query('I'));
        return read_command();
      case 'H':
        return read_command();
      case 'P': case 'B': case 'E': case 'D': case 'C': case 'F': case 'd': case 'c': case 'f':
        if (!skipping_to_sync_) {
          skipping_to_sync_ = true;
          spdlog::info("console: user {} from {} used the extended protocol: refused", user_, link_.client_addr);
          send(wire::error_response("ERROR", "0A000", "the predrop console answers only the simple query protocol", {},
                                    "Send commands as simple queries: psql does; psycopg2 does; node-postgres does when "
                                    "a query has no parameters."));
        }
        return read_command();
      default:
        send(wire::error_response("FATAL", "08P01", "invalid frontend message type " + std::to_string(static_cast<int>(type))));
        return close_after_send("invalid console message");
    }
  }

  void run_command(const std::string& text) {
    using Kind = ConsoleCommandLine::Kind;
    auto line = parse_console_command(text);
    spdlog::info("console: user {} from {}: {}", user_, link_.client_addr, line.text);
    switch (line.kind) {
      case Kind::empty: {
        std::string empty;
        wire::append_message(empty, 'I', {});   // EmptyQueryResponse
        send(empty + wire::ready_for_query('I'));
        return read_command();
      }
      case Kind::several:
        return reply(ConsoleReply::error("42601", "one console command per query"));
      case Kind::show_holds:
      case Kind::show_sessions:
        return show_sessions(line.kind == Kind::show_holds);
      case Kind::show_stats:
        return reply(stats_reply(ctx_));
      case Kind::show_config:
        return reply(config_reply(*ctx_.config()));
      case Kind::reload:
        return reload();
      case Kind::transaction: {
        // Nothing here is transactional; a driver that opens a transaction first (psycopg2 by
        // default) is answered as if it had one, and its ReadyForQuery stays idle so it never
        // sends COMMIT.
        ConsoleReply r;
        r.tag = line.tag;
        return reply(r);
      }
      case Kind::extra_arguments:
        return reply(ConsoleReply::error("42601", line.words + " takes no arguments"));
      case Kind::other:
        break;
    }
    auto it = ctx_.console_commands.find(line.words);
    if (it == ctx_.console_commands.end()) {
      return reply(ConsoleReply::error("42601", "unrecognized predrop console command \"" + line.text + "\"", {},
                                       std::string("Commands: ") + kCommandList + "."));
    }
    run_outside(it->second, line.args, line.words);
  }

  // A command of cli/: blocking (it reads the store), so on a thread of its own. Its answer goes
  // back through ctx_.console_work: one still running when serve ends posts nothing, and the
  // session it holds is never destroyed off its loop (its sockets belong to a loop that is gone).
  void run_outside(const ConsoleCommand& command, std::string args, std::string words) {
    ConsoleCaller caller{user_, link_.client_addr};
    ctx_.console_work->begin();
    std::thread([self = shared_from_this(), work = ctx_.console_work, exec = link_.executor, command,
                 args = std::move(args), caller, words = std::move(words), config = ctx_.config()]() mutable {
      ConsoleReply r;
      try {
        r = command(args, caller, config);
      } catch (const std::exception& e) {
        r = ConsoleReply::error("XX000", words + " failed: " + e.what());
      }
      work->finish([&] {
        asio::post(exec, [self = std::move(self), r = std::move(r), words] {
          if (self->link_.closed()) return;
          self->reply(r, words);
        });
      });
      // Not posted (serve has ended): left for the process's exit, never destroyed here.
      if (self) new std::shared_ptr<Console>(std::move(self));  // NOLINT: deliberate
    }).detach();
  }

  void reload() {
    if (!ctx_.reload) return reply(ConsoleReply::error("55000", "this predrop cannot reload"));
    auto exec = link_.executor;
    ctx_.reload([self = shared_from_this(), exec](ProxyContext::ReloadOutcome outcome) {
      asio::post(exec, [self, outcome = std::move(outcome)] {
        if (self->link_.closed()) return;
        if (!outcome.ok) {
          std::string detail;
          for (const auto& l : outcome.lines) detail += (detail.empty() ? "" : "\n") + l;
          return self->reply(ConsoleReply::error("F0000", "reload rejected, the running policy is kept", detail));
        }
        for (const auto& key : outcome.lines)
          self->send(wire::error_response("NOTICE", "01000", key + " changed in the file; the running value is kept until predrop restarts"));
        ConsoleReply r;
        r.tag = "RELOAD";
        self->reply(r);
      });
    });
  }

  // Every session's view, read on its own thread, gathered back on this one.
  void show_sessions(bool holds_only) {
    struct Gathered {
      std::mutex m;
      std::vector<SessionView> views;
      size_t left = 0;
    };
    auto sessions = ctx_.registry.all();
    auto gathered = std::make_shared<Gathered>();
    gathered->left = sessions.size();
    auto exec = link_.executor;
    auto self = shared_from_this();
    auto finish = [self, gathered, holds_only] {
      if (self->link_.closed()) return;
      std::sort(gathered->views.begin(), gathered->views.end(), [](auto& a, auto& b) { return a.id < b.id; });
      self->reply(holds_only ? self->holds_table(gathered->views) : self->sessions_table(gathered->views));
    };
    if (sessions.empty()) return finish();
    for (auto& session : sessions) {
      asio::post(session->executor(), [session, gathered, exec, finish] {
        auto v = session->view();
        std::lock_guard lock(gathered->m);
        if (v) gathered->views.push_back(std::move(*v));
        if (--gathered->left == 0) asio::post(exec, finish);
      });
    }
  }

  ConsoleReply sessions_table(const std::vector<SessionView>& views) const {
    ConsoleReply r;
    r.columns = {"session", "user", "database", "application_name", "client_addr", "tls", "upstream", "state",
                 "connected_s", "bytes_in", "bytes_out", "holds"};
    std::string upstream = cfg_->upstream.to_string();
    for (const auto& v : views)
      r.rows.push_back({std::to_string(v.id), v.user, v.database, v.application_name, v.client_addr,
                        std::string(v.tls ? "on" : "off"), v.state == "console" ? std::optional<std::string>() : upstream,
                        v.state, fixed(v.connected_s, 1), std::to_string(v.bytes_in), std::to_string(v.bytes_out),
                        std::to_string(v.holds)});
    return r;
  }

  ConsoleReply holds_table(const std::vector<SessionView>& views) const {
    ConsoleReply r;
    r.columns = {"session", "user", "database", "application_name", "client_addr", "statement", "tables", "waited_ms"};
    for (const auto& v : views)
      if (v.holding)
        r.rows.push_back({std::to_string(v.id), v.user, v.database, v.application_name, v.client_addr, v.statement,
                          v.tables, fixed(v.waited_ms, 1)});
    return r;
  }

  void reply(const ConsoleReply& r, const std::string& words = {}) {
    std::string out;
    if (!r.sqlstate.empty()) {
      out = wire::error_response("ERROR", r.sqlstate, r.message, r.detail, r.hint);
    } else {
      if (!r.columns.empty()) {
        out = wire::row_description(r.columns);
        for (const auto& row : r.rows) out += wire::data_row(row);
      }
      std::string tag = r.tag;
      if (tag.empty()) tag = words.empty() ? "SHOW" : words.substr(0, words.find(' '));
      out += wire::command_complete(tag);
    }
    send(out + wire::ready_for_query('I'));
    read_command();
  }

  // ---- writing, in order ----

  void send(std::string bytes) {
    if (bytes.empty()) return;
    out_.push_back(std::move(bytes));
    if (!writing_) write_next();
  }

  void close_after_send(const char* why) {
    closing_ = why;
    if (!writing_) link_.close_with_close_notify(closing_);
  }

  void write_next() {
    if (out_.empty()) {
      writing_ = false;
      if (closing_) link_.close_with_close_notify(closing_);
      return;
    }
    writing_ = true;
    auto bytes = std::make_shared<std::string>(std::move(out_.front()));
    out_.pop_front();
    link_.client.async_write(asio::buffer(*bytes), [self = shared_from_this(), bytes](boost::system::error_code ec, size_t) {
      if (self->link_.closed()) return;
      if (ec) return self->link_.close("client left");
      self->write_next();
    });
  }

  ConsoleLink link_;
  ProxyContext& ctx_;
  std::shared_ptr<const policy::Config> cfg_;
  std::string user_;
  Phase phase_ = Phase::authenticating;
  bool authenticated_ = false;
  std::string admitted_greeting_;   // the server's ParameterStatus and notices after AuthenticationOk
  bool member_ = false;
  std::string membership_error_;
  bool skipping_to_sync_ = false;
  std::deque<std::string> out_;
  bool writing_ = false;
  const char* closing_ = nullptr;
  std::unique_ptr<asio::steady_timer> auth_timer_;
};

std::shared_ptr<Console> run_console(ConsoleLink link) {
  auto console = std::make_shared<Console>(std::move(link));
  console->start();
  return console;
}

void console_terminate_admin_shutdown(const std::shared_ptr<Console>& console) { console->terminate_admin_shutdown(); }

std::optional<SessionView> Session::view() const {
  if (state_.closed()) return std::nullopt;
  SessionView v;
  v.id = id_;
  v.user = params_.get("user");
  v.database = params_.get("database");
  if (v.database.empty()) v.database = v.user;
  if (state_.console()) v.database = cfg_->console_database;
  v.application_name = params_.get("application_name");
  v.client_addr = client_addr_;
  v.tls = client_.is_tls();
  if (state_.console()) {
    v.state = "console";
  } else if (!state_.relaying()) {
    v.state = "startup";
  } else if (hold_.active()) {
    v.state = "holding";
  } else if (decoder_ && decoder_->replies_owed()) {
    v.state = "active";
  } else if (decoder_ && decoder_->transaction_status() == 'T') {
    v.state = "idle in transaction";
  } else if (decoder_ && decoder_->transaction_status() == 'E') {
    v.state = "idle in transaction (aborted)";
  } else {
    v.state = "idle";
  }
  auto now = Clock::now();
  v.connected_s = std::chrono::duration<double>(now - started_at_).count();
  v.bytes_in = front_.bytes;
  v.bytes_out = back_.bytes;
  v.holds = hold_.count();
  if (hold_.active()) {
    v.holding = true;
    v.waited_ms = std::chrono::duration<double, std::milli>(now - hold_.started()).count();
    if (hold_.context()) v.statement = hold_.context()->statement;
    v.tables = hold_.tables();
  }
  return v;
}

}  // namespace predrop::proxy
