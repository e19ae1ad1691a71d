// The listener, the event-loop threads, signals (drain on SIGTERM/SIGINT, reload on SIGHUP)
// and the process-wide pieces every session shares.
#include "proxy/server.hpp"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <thread>

#include "proxy/admin.hpp"
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
  return live_.size();
}

namespace {

// Free buffers a loop keeps for its next busy sessions (two each at most): enough for a burst of
// 32 active sessions per thread; past that they go back to malloc instead of pinning RSS forever.
constexpr size_t kPooledBuffersPerThread = 64;

int tls_version(const std::string& v) { return v == "1.3" ? TLS1_3_VERSION : TLS1_2_VERSION; }

std::unique_ptr<asio::ssl::context> make_client_tls(const policy::ClientTls& t) {
  if (t.cert_file.empty()) return nullptr;
  auto ctx = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
  ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 | asio::ssl::context::no_sslv3 |
                   asio::ssl::context::single_dh_use);
  SSL_CTX_set_min_proto_version(ctx->native_handle(), tls_version(t.min_version));
  if (!t.ciphers.empty() && SSL_CTX_set_cipher_list(ctx->native_handle(), t.ciphers.c_str()) != 1)
    throw std::runtime_error("tls.ciphers: OpenSSL accepts none of '" + t.ciphers + "'");
  ctx->use_certificate_chain_file(t.cert_file);
  ctx->use_private_key_file(t.key_file.empty() ? t.cert_file : t.key_file, asio::ssl::context::pem);
  return ctx;
}

std::unique_ptr<asio::ssl::context> make_upstream_tls(const policy::UpstreamTls& t) {
  if (t.sslmode == "disable") return nullptr;
  auto ctx = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(ctx->native_handle(), tls_version(t.min_version));
  if (t.sslmode == "verify-ca" || t.sslmode == "verify-full") {
    if (t.root_cert.empty()) throw std::runtime_error("upstream_tls.sslmode=" + t.sslmode + " needs upstream_tls.root_cert");
    ctx->load_verify_file(t.root_cert);
  }
  return ctx;
}

class Server {
 public:
  Server(std::shared_ptr<const policy::Config> cfg, std::string config_path, ConfigOverrides overrides)
      : config_path_(std::move(config_path)),
        overrides_(std::move(overrides)),
        threads_(cfg->threads > 0 ? cfg->threads : std::max(1u, std::thread::hardware_concurrency())),
        signals_(main_ioc_, SIGTERM, SIGINT, SIGHUP),
        drain_timer_(main_ioc_) {
    ctx_.set_config(cfg);
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
      capture::CaptureConfig cc;
      cc.capture_conninfo = cfg->capture_conninfo;
      cc.store_conninfo = cfg->store_conninfo.empty() ? cfg->capture_conninfo : cfg->store_conninfo;
      cc.store_table = cfg->store_table;
      cc.pool_size = cfg->capture_pool_size;
      cc.bounds.max_values = cfg->profile_max_values;
      cc.bounds.max_value_chars = cfg->profile_max_value_chars;
      cc.bounds.max_columns = cfg->profile_max_columns;
      cc.hash_excluded = cfg->hash_excluded;
      cc.naive_array_split = cfg->naive_array_split;
      cc.dedup_window_s = cfg->dedup_window_s;
      cc.enrich_identity_sql = cfg->enrich_identity_sql;
      cc.enrich_provenance_sql = cfg->enrich_provenance_sql;
      if (cfg->migrate_on_start) {
        auto r = capture::migrate(cc.store_conninfo, cc.store_table);
        if (!r.ok) throw std::runtime_error("store migration failed: " + r.error);
        spdlog::info("store at migration version {}", r.to_version);
      }
      ctx_.capture = std::make_unique<capture::CaptureService>(cc);
    } else {
      spdlog::warn("no --capture/--store given: destructive statements are relayed without snapshots");
    }
    tcp::endpoint ep(asio::ip::make_address(cfg->listen.host), cfg->listen.port);
    acceptor_.emplace(*loops_[0]);
    acceptor_->open(ep.protocol());
    acceptor_->set_option(tcp::acceptor::reuse_address(true));
    acceptor_->bind(ep);
    acceptor_->listen(asio::socket_base::max_listen_connections);
    spdlog::info("predrop listening on {} relaying to {} ({} threads)", cfg->listen.to_string(), cfg->upstream.to_string(), threads_);
  }

  int run() {
    if (auto cfg = ctx_.config(); cfg->admin) admin_ = std::make_unique<AdminServer>(ctx_, *cfg->admin);
    accept();
    wait_signal();
    std::vector<std::thread> workers;
    for (int i = 0; i < threads_; ++i) workers.emplace_back([this, i] { loops_[i]->run(); });
    main_ioc_.run();
    for (auto& g : guards_) g.reset();
    for (auto& l : loops_) l->stop();
    for (auto& w : workers) w.join();
    if (admin_) admin_->stop();
    if (ctx_.capture) ctx_.capture->stop();
    return 0;
  }

 private:
  void accept() {
    auto& loop = *loops_[next_loop_];
    BufferPool& pool = *pools_[next_loop_];
    next_loop_ = (next_loop_ + 1) % loops_.size();
    acceptor_->async_accept(loop, [this, &pool](boost::system::error_code ec, tcp::socket socket) {
      if (ec) {
        if (ec == asio::error::operation_aborted) return;
        spdlog::warn("accept failed: {}", ec.message());
        // Out of descriptors and the like: do not spin, try again shortly.
        auto t = std::make_shared<asio::steady_timer>(*loops_[0], std::chrono::milliseconds(50));
        t->async_wait([this, t](boost::system::error_code) { accept(); });
        return;
      }
      auto session = std::make_shared<Session>(ctx_, std::move(socket), pool);
      asio::post(session->executor(), [session] { session->start(); });
      accept();
    });
  }

  void wait_signal() {
    signals_.async_wait([this](boost::system::error_code ec, int sig) {
      if (ec) return;
      if (sig == SIGHUP) {
        reload();
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
        acceptor_->close(ignored);
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

  void reload() {
    if (config_path_.empty()) {
      spdlog::info("SIGHUP: no --config file to reload");
      return;
    }
    auto result = policy::load_file(config_path_);
    if (!result.errors.empty()) {
      metrics().reloads_failed.fetch_add(1);
      for (const auto& e : result.errors) spdlog::error("reload rejected, old policy kept: {}", e.to_string());
      return;
    }
    // Flags given on the command line keep their values: only the policy part changes.
    auto current = ctx_.config();
    auto next = std::make_shared<policy::Config>(*result.config);
    if (overrides_) overrides_(*next);
    next->listen = current->listen;
    next->upstream = current->upstream;
    next->admin = current->admin;
    next->capture_conninfo = current->capture_conninfo;
    next->store_conninfo = current->store_conninfo;
    ctx_.set_config(next);
    metrics().reloads_ok.fetch_add(1);
    spdlog::info("SIGHUP: policy reloaded from {}", config_path_);
  }

  std::string config_path_;
  ConfigOverrides overrides_;
  int threads_;
  asio::io_context main_ioc_{1};
  std::vector<std::unique_ptr<asio::io_context>> loops_;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards_;
  std::vector<std::unique_ptr<BufferPool>> pools_;
  std::optional<tcp::acceptor> acceptor_;
  size_t next_loop_ = 0;
  asio::signal_set signals_;
  asio::steady_timer drain_timer_;
  bool draining_ = false;
  std::chrono::steady_clock::time_point drain_deadline_;
  ProxyContext ctx_;
  std::unique_ptr<AdminServer> admin_;
};

void setup_logging(const policy::Logging& l) {
  auto logger = spdlog::stderr_logger_mt("predrop");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(l.level));
  if (l.format == "json")
    spdlog::set_pattern(R"({"time":"%Y-%m-%dT%H:%M:%S.%e%z","level":"%l","msg":"%v"})");
  else
    spdlog::set_pattern("%Y-%m-%d %H:%M:%S.%e %l %v");
}

}  // namespace

int serve(std::shared_ptr<const policy::Config> config, const std::string& config_path, ConfigOverrides overrides) {
  setup_logging(config->logging);
  ::signal(SIGPIPE, SIG_IGN);
  try {
    Server server(std::move(config), config_path, std::move(overrides));
    return server.run();
  } catch (const std::exception& e) {
    spdlog::critical("predrop serve: {}", e.what());
    return 1;
  }
}

}  // namespace predrop::proxy
