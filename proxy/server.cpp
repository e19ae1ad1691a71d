// The listener, the event-loop threads, signals (drain on SIGTERM/SIGINT, reload on SIGHUP)
// and the process-wide pieces every session shares.
#include "proxy/server.hpp"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "proxy/admin.hpp"
#include "proxy/listen.hpp"
#include "proxy/context.hpp"
#include "proxy/metrics.hpp"
#include "proxy/session.hpp"

namespace predrop::proxy {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

void SessionRegistry::add(const std::shared_ptr<Session>& s) {
  std::lock_guard lk(mu_);
  live_[s.get()] = s;
}
void SessionRegistry::remove(Session* s) {
  std::lock_guard lk(mu_);
  live_.erase(s);
  consoles_.erase(s);
  auto it = key_of_.find(s);
  if (it != key_of_.end()) {
    by_key_.erase(it->second);
    key_of_.erase(it);
  }
}
void SessionRegistry::set_key(const std::shared_ptr<Session>& s, std::string key) {
  std::lock_guard lk(mu_);
  auto it = key_of_.find(s.get());
  if (it != key_of_.end()) by_key_.erase(it->second);
  key_of_[s.get()] = key;
  by_key_[std::move(key)] = s;
}
std::shared_ptr<Session> SessionRegistry::find_by_key(const std::string& key) {
  std::lock_guard lk(mu_);
  auto it = by_key_.find(key);
  return it == by_key_.end() ? nullptr : it->second.lock();
}
std::vector<std::shared_ptr<Session>> SessionRegistry::all() {
  std::lock_guard lk(mu_);
  std::vector<std::shared_ptr<Session>> out;
  for (auto& [_, w] : live_)
    if (auto s = w.lock()) out.push_back(std::move(s));
  return out;
}
size_t SessionRegistry::size() {
  std::lock_guard lk(mu_);
  return live_.size() - consoles_.size();
}
void SessionRegistry::set_console(Session* s) {
  std::lock_guard lk(mu_);
  if (live_.count(s)) consoles_.insert(s);
}

namespace {

// Free buffers a loop keeps for its next busy sessions (two each at most): enough for a burst of
// 32 active sessions per thread; past that they go back to malloc instead of pinning RSS forever.
constexpr size_t kPooledBuffersPerThread = 64;

int tls_version(const std::string& v) { return v == "1.3" ? TLS1_3_VERSION : TLS1_2_VERSION; }

// Versions, TLS 1.2 cipher list and TLS 1.3 suites of one leg; `leg` names its config section in errors.
void restrict_protocol(SSL_CTX* ctx, const std::string& leg, const std::string& min_version,
                       const std::string& max_version, const std::string& ciphers, const std::string& ciphersuites) {
  if (SSL_CTX_set_min_proto_version(ctx, tls_version(min_version)) != 1 ||
      SSL_CTX_set_max_proto_version(ctx, tls_version(max_version)) != 1)
    throw std::runtime_error(leg + ".min_version/max_version: OpenSSL refused " + min_version + ".." + max_version);
  if (!ciphers.empty() && SSL_CTX_set_cipher_list(ctx, ciphers.c_str()) != 1)
    throw std::runtime_error(leg + ".ciphers: OpenSSL accepts none of '" + ciphers + "'");
  if (!ciphersuites.empty() && SSL_CTX_set_ciphersuites(ctx, ciphersuites.c_str()) != 1)
    throw std::runtime_error(leg + ".ciphersuites: OpenSSL does not accept '" + ciphersuites +
                             "' (TLS 1.3 suite names such as TLS_AES_256_GCM_SHA384, separated by ':')");
}

std::unique_ptr<asio::ssl::context> make_client_tls(const policy::ClientTls& t) {
  if (t.cert_file.empty()) return nullptr;
  auto ctx = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
  ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 | asio::ssl::context::no_sslv3 |
                   asio::ssl::context::single_dh_use);
  restrict_protocol(ctx->native_handle(), "tls", t.min_version, t.max_version, t.ciphers, t.ciphersuites);
  ctx->use_certificate_chain_file(t.cert_file);
  ctx->use_private_key_file(t.key_file.empty() ? t.cert_file : t.key_file, asio::ssl::context::pem);
  // PostgreSQL 17 selects the ALPN protocol "postgresql" that libpq 17 offers, and psql shows it:
  // predrop answers the same, so a client sees the handshake it would see direct. A client offering
  // other protocols only is not refused (a PostgreSQL before 17 ignores ALPN altogether).
  SSL_CTX_set_alpn_select_cb(
      ctx->native_handle(),
      [](SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in, unsigned int inlen,
         void*) -> int {
        static const unsigned char kPostgresql[] = {10, 'p', 'o', 's', 't', 'g', 'r', 'e', 's', 'q', 'l'};
        unsigned char* chosen = nullptr;
        if (SSL_select_next_proto(&chosen, outlen, kPostgresql, sizeof kPostgresql, in, inlen) != OPENSSL_NPN_NEGOTIATED)
          return SSL_TLSEXT_ERR_NOACK;
        *out = chosen;
        return SSL_TLSEXT_ERR_OK;
      },
      nullptr);
  return ctx;
}

std::unique_ptr<asio::ssl::context> make_upstream_tls(const policy::UpstreamTls& t) {
  if (t.sslmode == "disable") return nullptr;
  auto ctx = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_client);
  restrict_protocol(ctx->native_handle(), "upstream_tls", t.min_version, t.max_version, t.ciphers, t.ciphersuites);
  if (t.sslmode == "verify-ca" || t.sslmode == "verify-full") {
    if (t.root_cert.empty()) ctx->set_default_verify_paths();
    else ctx->load_verify_file(t.root_cert);
  }
  return ctx;
}

capture::CaptureConfig capture_config(const policy::Config& cfg) {
  capture::CaptureConfig cc;
  cc.capture_conninfo = cfg.capture_conninfo;
  cc.store_conninfo = cfg.store_conninfo.empty() ? cfg.capture_conninfo : cfg.store_conninfo;
  cc.store_table = cfg.store_table;
  cc.pool_size = cfg.capture_pool_size;
  cc.idle_close = std::chrono::seconds(cfg.capture_idle_close_s);
  cc.bounds.max_values = cfg.profile_max_values;
  cc.bounds.max_value_chars = cfg.profile_max_value_chars;
  cc.bounds.max_columns = cfg.profile_max_columns;
  cc.hash_excluded = cfg.hash_excluded;
  cc.naive_array_split = cfg.naive_array_split;
  cc.dedup_window_s = cfg.dedup_window_s;
  cc.enrich_identity_sql = cfg.enrich_identity_sql;
  cc.enrich_provenance_sql = cfg.enrich_provenance_sql;
  cc.store_check_interval = std::chrono::seconds(cfg.store_check_interval_s);
  cc.after_delay = std::chrono::milliseconds(cfg.after_delay_ms);
  cc.analyze_after_create = cfg.analyze_after_create;
  cc.stats_horizon = std::chrono::seconds(cfg.stats_horizon_s);
  cc.stats_poll = std::chrono::milliseconds(cfg.stats_poll_ms);
  cc.stats_waiting_max = static_cast<size_t>(cfg.stats_waiting_max);
  return cc;
}

class Server {
 public:
  Server(std::shared_ptr<const policy::Config> cfg, std::string config_path, ConfigOverrides overrides,
         ConsoleCommands console_commands)
      : config_path_(std::move(config_path)),
        overrides_(std::move(overrides)),
        threads_(cfg->threads > 0 ? cfg->threads : std::max(1u, std::thread::hardware_concurrency())),
        signals_(main_ioc_, SIGTERM, SIGINT, SIGHUP),
        drain_timer_(main_ioc_) {
    ctx_.set_config(cfg);
    ctx_.console_commands = std::move(console_commands);
    ctx_.reload = [this](std::function<void(ProxyContext::ReloadOutcome)> done) {
      asio::post(main_ioc_, [this, done = std::move(done)] { done(reload("RELOAD")); });
    };
    for (int i = 0; i < threads_; ++i) {
      loops_.push_back(std::make_unique<asio::io_context>(1));
      guards_.emplace_back(asio::make_work_guard(*loops_.back()));
      pools_.push_back(std::make_unique<BufferPool>(cfg->limits.buffer_bytes, kPooledBuffersPerThread));
    }
    ctx_.client_tls = make_client_tls(cfg->tls);
    ctx_.upstream_tls = make_upstream_tls(cfg->upstream_tls);
    if (ctx_.client_tls && ctx_.upstream_tls)
      spdlog::warn(
          "TLS on both legs: SCRAM channel binding cannot hold through a terminating proxy. Clients must connect with "
          "channel_binding=disable (libpq's default 'prefer' then works only against password/md5 users).");
    if (!cfg->capture_conninfo.empty() || !cfg->store_conninfo.empty()) {
      capture::CaptureConfig cc = capture_config(*cfg);
      if (cfg->migrate_on_start) {
        auto r = capture::migrate(cc.store_conninfo, cc.store_table);
        if (r.ok) {
          spdlog::info("store at migration version {}", r.to_version);
        } else if (r.reached) {
          throw std::runtime_error("store migration failed: " + r.error);
        } else {
          // An unreachable store must not keep clients out: serve (holds fail open, counted) and
          // migrate once it answers, so snapshots resume without a restart.
          spdlog::error("store unreachable at start, serving without snapshots until it answers: {}", r.error);
          retry_migration_ = std::make_pair(cc.store_conninfo, cc.store_table);
        }
      }
      ctx_.capture = std::make_unique<capture::CaptureService>(cc);
      ctx_.hold_capture = std::make_unique<CaptureForHold>(*ctx_.capture);
    } else {
      spdlog::warn("no --capture/--store given: destructive statements are relayed without snapshots");
    }
    // The admin endpoint is bound before the listeners: once a client's connect succeeds, predrop
    // is up for good, never about to exit because the admin port is taken (a harness that probes
    // the listen port saw it accept and then die).
    if (cfg->admin) admin_ = std::make_unique<AdminServer>(ctx_, *cfg->admin);
    acceptors_ = open_listeners(loops_[0]->get_executor(), cfg->listen, "listen", asio::socket_base::max_listen_connections);
    std::string bound;
    for (auto& a : acceptors_) {
      auto ep = a.local_endpoint();
      bound += (bound.empty() ? "" : ", ") + policy::Endpoint{ep.address().to_string(), ep.port()}.to_string();
    }
    if (bound != cfg->listen.to_string()) bound = cfg->listen.to_string() + " (" + bound + ")";
    spdlog::info("predrop listening on {} relaying to {} ({} threads)", bound, cfg->upstream.to_string(), threads_);
  }

  int run() {
    if (retry_migration_) migrate_in_background(retry_migration_->first, retry_migration_->second);
    for (auto& a : acceptors_) accept(a);
    wait_signal();
    std::vector<std::thread> workers;
    for (int i = 0; i < threads_; ++i) workers.emplace_back([this, i] { loops_[i]->run(); });
    main_ioc_.run();
    for (auto& g : guards_) g.reset();
    for (auto& l : loops_) l->stop();
    for (auto& w : workers) w.join();
    // A console command still reading the store posts its answer onto a loop: not after this.
    if (size_t left = ctx_.console_work->close(std::chrono::seconds(10)))
      spdlog::warn("{} console command(s) still running at exit: their answers are not sent", left);
    if (admin_) admin_->stop();
    stop_migration_retry();
    if (ctx_.capture) ctx_.capture->stop();
    return 0;
  }

 private:
  // Lives on its own thread (migrate() blocks in libpq) and outlives the Server if an attempt is
  // still connecting at exit, so it touches nothing but this state.
  struct MigrationRetry {
    std::mutex m;
    std::condition_variable cv;
    bool stop = false;
    bool attempting = false;
  };

  void migrate_in_background(std::string conninfo, std::string table) {
    migration_retry_ = std::make_shared<MigrationRetry>();
    migration_thread_ = std::thread([st = migration_retry_, conninfo = std::move(conninfo), table = std::move(table)] {
      auto delay = std::chrono::milliseconds(500);
      for (;;) {
        {
          std::unique_lock lock(st->m);
          if (st->cv.wait_for(lock, delay, [&] { return st->stop; })) return;
          st->attempting = true;
        }
        auto r = capture::migrate(conninfo, table);
        std::lock_guard lock(st->m);
        st->attempting = false;
        if (st->stop) return;
        if (r.ok) {
          spdlog::info("store reachable again, at migration version {}: snapshots resume", r.to_version);
          return;
        }
        if (r.reached) {
          spdlog::error("store migration failed: {}", r.error);
          return;
        }
        spdlog::debug("store still unreachable: {}", r.error);
        delay = std::min(delay * 2, std::chrono::milliseconds(10000));
      }
    });
  }

  void stop_migration_retry() {
    if (!migration_retry_) return;
    bool busy;
    {
      std::lock_guard lock(migration_retry_->m);
      migration_retry_->stop = true;
      busy = migration_retry_->attempting;
    }
    migration_retry_->cv.notify_all();
    // A connect attempt to a silent host may take the conninfo's connect_timeout: do not wait for it.
    if (busy) migration_thread_.detach();
    else migration_thread_.join();
  }

  // Every acceptor runs on loops_[0], so next_loop_ needs no lock.
  void accept(tcp::acceptor& acceptor) {
    auto& loop = *loops_[next_loop_];
    BufferPool& pool = *pools_[next_loop_];
    next_loop_ = (next_loop_ + 1) % loops_.size();
    acceptor.async_accept(loop, [this, &acceptor, &pool](boost::system::error_code ec, tcp::socket socket) {
      if (ec) {
        if (ec == asio::error::operation_aborted) return;
        spdlog::warn("accept failed: {}", ec.message());
        // Out of descriptors and the like: do not spin, try again shortly.
        auto t = std::make_shared<asio::steady_timer>(*loops_[0], std::chrono::milliseconds(50));
        t->async_wait([this, t, &acceptor](boost::system::error_code) { accept(acceptor); });
        return;
      }
      auto session = std::make_shared<Session>(ctx_, std::move(socket), pool);
      asio::post(session->executor(), [session] { session->start(); });
      accept(acceptor);
    });
  }

  void wait_signal() {
    signals_.async_wait([this](boost::system::error_code ec, int sig) {
      if (ec) return;
      if (sig == SIGHUP) {
        reload("SIGHUP");
        return wait_signal();
      }
      if (draining_) {
        spdlog::warn("second signal: closing every session now");
        return finish();
      }
      draining_ = true;
      ctx_.draining = true;
      spdlog::info("signal {}: no new clients; draining {} sessions for up to {} ms", sig, ctx_.registry.size(),
                   ctx_.config()->limits.drain_timeout_ms);
      asio::post(*loops_[0], [this] {
        boost::system::error_code ignored;
        for (auto& a : acceptors_) a.close(ignored);
      });
      drain_deadline_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(ctx_.config()->limits.drain_timeout_ms);
      poll_drain();
      wait_signal();
    });
  }

  void poll_drain() {
    if (ctx_.registry.size() == 0) return finish();
    if (std::chrono::steady_clock::now() >= drain_deadline_) return finish();
    drain_timer_.expires_after(std::chrono::milliseconds(100));
    drain_timer_.async_wait([this](boost::system::error_code ec) {
      if (!ec) poll_drain();
    });
  }

  void finish() {
    for (auto& s : ctx_.registry.all()) asio::post(s->executor(), [s] { s->terminate_admin_shutdown(); });
    // Give the goodbye messages a moment to leave, then stop the loops.
    drain_timer_.expires_after(std::chrono::milliseconds(200));
    drain_timer_.async_wait([this](boost::system::error_code) {
      signals_.cancel();
      main_ioc_.stop();
    });
  }

  // SIGHUP, or the console's RELOAD (`why` says which, in the log).
  ProxyContext::ReloadOutcome reload(const char* why) {
    ProxyContext::ReloadOutcome outcome;
    if (config_path_.empty()) {
      spdlog::info("{}: no --config file to reload", why);
      outcome.lines.push_back("predrop serve runs without --config: there is no file to reload");
      return outcome;
    }
    auto result = policy::load_file(config_path_);
    if (!result.errors.empty()) {
      metrics().reloads_failed.fetch_add(1);
      for (const auto& e : result.errors) {
        spdlog::error("reload rejected, old policy kept: {}", e.to_string());
        outcome.lines.push_back(e.to_string());
      }
      return outcome;
    }
    auto current = ctx_.config();
    auto next = std::make_shared<policy::Config>(*result.config);
    if (overrides_) overrides_(*next);
    // Listeners, pools, TLS and connections were built at start: restart-only keys keep their
    // running values (flags included), and the log says which ones the file changed.
    auto restart_required = policy::keep_restart_keys(*next, *current);
    ctx_.set_config(next);
    spdlog::set_level(spdlog::level::from_str(next->logging.level));
    if (ctx_.capture) ctx_.capture->reconfigure(capture_config(*next));
    metrics().reloads_ok.fetch_add(1);
    spdlog::info("{}: policy reloaded from {}", why, config_path_);
    for (const auto& key : restart_required) {
      spdlog::warn("{}: {} changed in the file; the running value is kept until predrop restarts", why, key);
      outcome.lines.push_back(key);
    }
    outcome.ok = true;
    return outcome;
  }

  std::string config_path_;
  ConfigOverrides overrides_;
  int threads_;
  asio::io_context main_ioc_{1};
  std::vector<std::unique_ptr<asio::io_context>> loops_;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards_;
  std::vector<std::unique_ptr<BufferPool>> pools_;
  std::vector<tcp::acceptor> acceptors_;
  size_t next_loop_ = 0;
  asio::signal_set signals_;
  asio::steady_timer drain_timer_;
  bool draining_ = false;
  std::optional<std::pair<std::string, std::string>> retry_migration_;  // store conninfo, table
  std::shared_ptr<MigrationRetry> migration_retry_;
  std::thread migration_thread_;
  std::chrono::steady_clock::time_point drain_deadline_;
  ProxyContext ctx_;
  std::unique_ptr<AdminServer> admin_;
};

// Log lines carry what clients chose (user, database, application_name, table names): a line
// stays one line, and a JSON line stays valid JSON, whatever those bytes are. Text format:
// control characters as \xNN. JSON: quotes, backslashes and control characters escaped, bytes
// that are not UTF-8 as U+FFFD.
class EscapedPayload : public spdlog::custom_flag_formatter {
 public:
  explicit EscapedPayload(bool json) : json_(json) {}

  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    const auto* p = reinterpret_cast<const unsigned char*>(msg.payload.data());
    const size_t n = msg.payload.size();
    for (size_t i = 0; i < n;) {
      const unsigned char c = p[i];
      if (c < 0x20 || c == 0x7f || (json_ && (c == '"' || c == '\\'))) {
        char buf[8];
        int len = json_ ? (c == '"' || c == '\\' ? std::snprintf(buf, sizeof buf, "\\%c", c)
                                                 : std::snprintf(buf, sizeof buf, "\\u%04x", c))
                        : std::snprintf(buf, sizeof buf, "\\x%02x", c);
        dest.append(buf, buf + len);
        ++i;
        continue;
      }
      size_t len = json_ ? utf8_sequence(p + i, n - i) : 1;
      if (len == 0) {
        static constexpr char kReplacement[] = "\\ufffd";
        dest.append(kReplacement, kReplacement + sizeof kReplacement - 1);
        ++i;
        continue;
      }
      dest.append(msg.payload.data() + i, msg.payload.data() + i + len);
      i += len;
    }
  }

  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<EscapedPayload>(json_); }

 private:
  // Length of the well-formed UTF-8 sequence at p, 0 when there is none.
  static size_t utf8_sequence(const unsigned char* p, size_t avail) {
    if (p[0] < 0x80) return 1;
    size_t len = p[0] >= 0xC2 && p[0] <= 0xDF ? 2 : p[0] >= 0xE0 && p[0] <= 0xEF ? 3 : p[0] >= 0xF0 && p[0] <= 0xF4 ? 4 : 0;
    if (len == 0 || len > avail) return 0;
    for (size_t k = 1; k < len; ++k)
      if ((p[k] & 0xC0) != 0x80) return 0;
    if (p[0] == 0xE0 && p[1] < 0xA0) return 0;                    // overlong
    if (p[0] == 0xED && p[1] >= 0xA0) return 0;                   // surrogates
    if (p[0] == 0xF0 && p[1] < 0x90) return 0;                    // overlong
    if (p[0] == 0xF4 && p[1] >= 0x90) return 0;                   // above U+10FFFF
    return len;
  }

  bool json_;
};

void setup_logging(const policy::Logging& l) {
  auto logger = spdlog::stderr_logger_mt("predrop");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(l.level));
  const bool json = l.format == "json";
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<EscapedPayload>('*', json);
  formatter->set_pattern(json ? R"({"time":"%Y-%m-%dT%H:%M:%S.%e%z","level":"%l","msg":"%*"})"
                              : "%Y-%m-%d %H:%M:%S.%e %l %*");
  spdlog::set_formatter(std::move(formatter));
}

}  // namespace

int serve(std::shared_ptr<const policy::Config> config, const std::string& config_path, ConfigOverrides overrides,
          ConsoleCommands console_commands) {
  setup_logging(config->logging);
  ::signal(SIGPIPE, SIG_IGN);
  try {
    Server server(std::move(config), config_path, std::move(overrides), std::move(console_commands));
    return server.run();
  } catch (const std::exception& e) {
    spdlog::critical("predrop serve: {}", e.what());
    return 1;
  }
}

}  // namespace predrop::proxy
