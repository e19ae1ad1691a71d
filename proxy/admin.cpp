#include "proxy/admin.hpp"

#include "proxy/listen.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstdio>
#include <dirent.h>
#include <fstream>
#include <sstream>
#include <thread>

#include "proxy/background_metrics.hpp"
#include "proxy/hold.hpp"
#include "proxy/metrics.hpp"
#include "quarantine/metrics.hpp"

#ifndef PREDROP_VERSION
#define PREDROP_VERSION "dev"
#endif

namespace predrop::proxy {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

const auto kProcessStart = std::chrono::system_clock::now();

void counter(std::string& out, const char* name, const char* help, uint64_t v) {
  out += "# HELP " + std::string(name) + " " + help + "\n# TYPE " + name + " counter\n" + name + " " + std::to_string(v) + "\n";
}
void gauge(std::string& out, const char* name, const char* help, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  out += "# HELP " + std::string(name) + " " + help + "\n# TYPE " + name + " gauge\n" + name + " " + buf + "\n";
}
void header(std::string& out, const char* name, const char* type, const char* help) {
  out += "# HELP " + std::string(name) + " " + help + "\n# TYPE " + name + " " + type + "\n";
}
void sample(std::string& out, const char* name, const std::string& labels, uint64_t v) {
  out += std::string(name) + "{" + labels + "} " + std::to_string(v) + "\n";
}

void process_metrics(std::string& out) {
  // /proc/self/stat fields 14, 15 (utime, stime in ticks), 23 (vsize), 24 (rss pages).
  std::ifstream stat("/proc/self/stat");
  std::string line;
  std::getline(stat, line);
  auto rparen = line.rfind(')');
  std::istringstream rest(rparen == std::string::npos ? "" : line.substr(rparen + 2));
  std::vector<std::string> f;
  for (std::string tok; rest >> tok;) f.push_back(tok);
  double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  if (f.size() > 22) {
    double cpu = (std::stod(f[11]) + std::stod(f[12])) / ticks;
    out += "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n# TYPE process_cpu_seconds_total counter\n";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.2f", cpu);
    out += std::string("process_cpu_seconds_total ") + buf + "\n";
    gauge(out, "process_virtual_memory_bytes", "Virtual memory size in bytes.", std::stod(f[20]));
    gauge(out, "process_resident_memory_bytes", "Resident memory size in bytes.", std::stod(f[21]) * sysconf(_SC_PAGESIZE));
  }
  int fds = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d)) ++fds;
    closedir(d);
    fds -= 2;
  }
  gauge(out, "process_open_fds", "Number of open file descriptors.", fds);
  gauge(out, "process_max_fds", "Maximum number of open file descriptors.", static_cast<double>(sysconf(_SC_OPEN_MAX)));
  gauge(out, "process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
        std::chrono::duration<double>(kProcessStart.time_since_epoch()).count());
}

bool upstream_reachable(const policy::Endpoint& ep, std::string& why) {
  try {
    asio::io_context io;
    tcp::socket s(io);
    tcp::resolver r(io);
    auto results = r.resolve(ep.host, std::to_string(ep.port));
    boost::system::error_code ec;
    asio::connect(s, results, ec);
    if (ec) {
      why = "upstream " + ep.to_string() + " unreachable: " + ec.message();
      return false;
    }
    return true;
  } catch (const std::exception& e) {
    why = "upstream " + ep.to_string() + " unreachable: " + e.what();
    return false;
  }
}

}  // namespace

std::string render_metrics(ProxyContext& ctx) {
  auto& m = metrics();
  std::string out;
  out.reserve(8192);
  gauge(out, "predrop_client_connections", "Client connections open now.", static_cast<double>(m.client_connections.load()));
  gauge(out, "predrop_server_connections", "Upstream connections open now.", static_cast<double>(m.server_connections.load()));
  counter(out, "predrop_client_connections_accepted_total", "Client connections accepted.", m.client_connections_total.load());
  counter(out, "predrop_client_connections_rejected_total", "Client connections refused by limits.max_clients.",
          m.client_connections_rejected.load());
  auto relayed = relay_totals();
  header(out, "predrop_bytes_total", "counter", "Bytes relayed, by direction.");
  sample(out, "predrop_bytes_total", "direction=\"client_to_server\"", relayed.bytes_client_to_server);
  sample(out, "predrop_bytes_total", "direction=\"server_to_client\"", relayed.bytes_server_to_client);
  header(out, "predrop_messages_total", "counter", "Protocol messages framed, by direction.");
  sample(out, "predrop_messages_total", "direction=\"frontend\"", relayed.frontend_messages);
  sample(out, "predrop_messages_total", "direction=\"backend\"", relayed.backend_messages);
  header(out, "predrop_copy_batched_total", "counter",
         "COPY data phases large enough to be read in batches (socket low-water mark raised), by direction.");
  sample(out, "predrop_copy_batched_total", "direction=\"client_to_server\"", m.copy_batched_in.load());
  sample(out, "predrop_copy_batched_total", "direction=\"server_to_client\"", m.copy_batched_out.load());
  auto cs = ctx.classifier.stats();
  header(out, "predrop_statements_total", "counter", "Statements seen, by how the classifier handled them.");
  sample(out, "predrop_statements_total", "path=\"prefiltered\"", cs.prefiltered);
  sample(out, "predrop_statements_total", "path=\"parsed\"", cs.parsed);
  sample(out, "predrop_statements_total", "path=\"cache_hit\"", cs.cache_hit);
  sample(out, "predrop_statements_total", "path=\"parse_error\"", cs.parse_error);
  header(out, "predrop_intercepted_statements_total", "counter", "Destructive statement targets intercepted, by kind.");
  for (int k = 0; k < parser::kDestroyKindCount; ++k)
    sample(out, "predrop_intercepted_statements_total",
           "kind=\"" + std::string(parser::to_string(static_cast<parser::DestroyKind>(k))) + "\"",
           m.intercepted_by_kind[k].load());
  header(out, "predrop_snapshots_total", "counter", "Snapshot attempts, by outcome.");
  for (SnapshotOutcome o : kSnapshotMetricOutcomes)
    sample(out, "predrop_snapshots_total", std::string("outcome=\"") + capture::to_string(o) + "\"",
           m.snapshots[static_cast<size_t>(o)].load());
  counter(out, "predrop_rejected_statements_total", "Statements refused (fail closed, or cancelled while held).",
          m.rejected_statements.load());
  header(out, "predrop_hold_endings_total", "counter", "Holds ended, by how: released, failed_open, refused, cancelled, client_left.");
  for (size_t e = 0; e < m.hold_endings.size(); ++e)
    sample(out, "predrop_hold_endings_total", std::string("ending=\"") + to_string(static_cast<HoldEnding>(e)) + "\"",
           m.hold_endings[e].load());
  counter(out, "predrop_protocol_desync_total", "Server replies that answered nothing predrop saw the client ask for.",
          m.protocol_desync.load());
  counter(out, "predrop_unresolved_statements_total", "Statements that may destroy what no parser can see (DO, EXECUTE, CALL).",
          m.unresolved_statements.load());
  counter(out, "predrop_unparsed_statements_total",
          "Texts with a statement the parser rejects whose targets its tokens do not show (ledger row unparsed).",
          m.unparsed_statements.load());
  counter(out, "predrop_uninspected_statements_total", "Statements larger than limits.max_inspect_bytes, relayed unclassified.",
          m.uninspected_large_statements.load());
  header(out, "predrop_protocol_errors_total", "counter",
         "Protocol violations: phase=startup before a session (bad lengths, bad startup packets), phase=session in one.");
  sample(out, "predrop_protocol_errors_total", "phase=\"startup\"", m.protocol_errors_startup.load());
  sample(out, "predrop_protocol_errors_total", "phase=\"session\"", m.protocol_errors.load());
  counter(out, "predrop_cancel_requests_total", "CancelRequests received.", m.cancel_requests.load());
  header(out, "predrop_drop_outcomes_total", "counter", "Whether captured tables really died once the transaction ended.");
  capture::CaptureStats cap{};
  if (ctx.capture) cap = ctx.capture->stats();
  sample(out, "predrop_drop_outcomes_total", "outcome=\"dropped\"", cap.dropped);
  sample(out, "predrop_drop_outcomes_total", "outcome=\"not_dropped\"", cap.not_dropped);
  sample(out, "predrop_drop_outcomes_total", "outcome=\"quarantined\"", cap.quarantined);
  counter(out, "predrop_quarantined_total", "Tables a committed DROP moved into the quarantine schema (outcome checks).",
          cap.quarantined);
  counter(out, "predrop_quarantine_substitutions_total",
          "Statements a quarantine rule covered that reached the server as their substitute.",
          m.quarantine_substitutions.load());
  header(out, "predrop_quarantine_yielded_total", "counter",
         "Quarantined tables purged for good so that a later statement answers as direct, by that statement.");
  for (size_t k = 0; k < m.quarantine_yielded.size(); ++k)
    sample(out, "predrop_quarantine_yielded_total",
           "to=\"drop_" + std::string(capture::to_string(static_cast<capture::YieldKind>(k))) + "\"",
           m.quarantine_yielded[k].load());
  counter(out, "predrop_quarantine_yield_failures_total",
          "Later statements whose quarantined tables could not be found or purged (the statement went on as sent).",
          m.quarantine_yield_failures.load());
  counter(out, "predrop_quarantine_fallbacks_total",
          "Statements a quarantine rule covered that ran for real: the substitute could not keep a table, or the text could not be substituted.",
          m.quarantine_fallbacks.load());
  quarantine::render_metrics(out);
  render_background_metrics(out);
  out += m.hold_duration.render("predrop_hold_duration_seconds", "Time a destructive statement was held.");
  out += m.capture_duration.render("predrop_capture_duration_seconds", "Time to capture and write a statement's snapshots.");
  header(out, "predrop_capture_phase_seconds", "histogram",
         "Where a hold's capture time went: waiting for a capture connection, the catalog statement, "
         "waiting for a store connection, the store statement.");
  for (size_t i = 0; i < m.capture_phase.size(); ++i)
    out += m.capture_phase[i].render_series("predrop_capture_phase_seconds",
                                            std::string("phase=\"") + capture::kCapturePhaseNames[i] + "\"");
  header(out, "predrop_capture_pool_connections", "gauge", "Capture connections, by state.");
  const capture::CaptureStats& ps = cap;
  sample(out, "predrop_capture_pool_connections", "state=\"idle\"", ps.pool_idle);
  sample(out, "predrop_capture_pool_connections", "state=\"busy\"", ps.pool_busy);
  gauge(out, "predrop_capture_queue", "Capture requests waiting for a connection.", static_cast<double>(ps.queued));
  if (ctx.capture) {
    gauge(out, "predrop_store_up", "1 when the snapshot store was reachable and writable at the last write or check.",
          ps.store_up ? 1 : 0);
    header(out, "predrop_store_last_success_timestamp_seconds", "gauge",
           "Unix time of the last successful snapshot write or store check; 0: none yet.");
    char stamp[64];
    std::snprintf(stamp, sizeof stamp, "predrop_store_last_success_timestamp_seconds %.3f\n", ps.store_last_success_unix_s);
    out += stamp;
  }
  gauge(out, "predrop_store_retry_queue", "Ledger statements waiting for an unreachable store, retried with backoff.",
        static_cast<double>(ps.store_retry_queued));
  counter(out, "predrop_store_retry_lost_total", "Ledger statements dropped because the store retry queue was full.",
          ps.store_retry_lost);
  counter(out, "predrop_afters_requested_total", "Tables of committed shape changes sent for an after.",
          m.afters_requested.load());
  gauge(out, "predrop_afters_queued", "Afters of committed shape changes waiting or running.",
        static_cast<double>(ps.afters_queued));
  counter(out, "predrop_afters_written_total", "After snapshots written (post_create, post_alter, post_analyze).",
          ps.afters_written);
  counter(out, "predrop_afters_absorbed_total",
          "Afters written as a copy of a later hold's before of the same table (no catalog read).", ps.afters_absorbed);
  counter(out, "predrop_afters_lost_total", "Afters refused because their queue was full; each has a ledger row.",
          ps.afters_lost);
  counter(out, "predrop_snapshot_announcements_total",
          "Written snapshot rows announced on predrop_snapshots, after their write committed.", ps.announced);
  counter(out, "predrop_snapshot_announcements_lost_total",
          "Announcements dropped: more than 10,000 waited for a store that did not answer.", ps.announcements_lost);
  gauge(out, "predrop_afters_waiting_for_statistics", "Afters whose table has no statistics yet.",
        static_cast<double>(ps.stats_waiting));
  counter(out, "predrop_statistics_checks_total", "pg_stat_user_tables checks for afters: one per database and period.",
          ps.stats_queries);
  counter(out, "predrop_afters_statistics_gave_up_total", "Afters that kept their shape alone: no statistics within the horizon.",
          ps.stats_gave_up);
  header(out, "predrop_config_reloads_total", "counter", "SIGHUP reloads, by result.");
  sample(out, "predrop_config_reloads_total", "result=\"ok\"", m.reloads_ok.load());
  sample(out, "predrop_config_reloads_total", "result=\"failed\"", m.reloads_failed.load());
  header(out, "predrop_build_info", "gauge", "Build information.");
  out += std::string("predrop_build_info{version=\"") + PREDROP_VERSION + "\"} 1\n";
  process_metrics(out);
  return out;
}

struct AdminServer::Impl {
  ProxyContext& ctx;
  asio::io_context io{1};
  std::vector<tcp::acceptor> acceptors;
  std::thread thread;

  explicit Impl(ProxyContext& c) : ctx(c) {}

  void accept(tcp::acceptor& acceptor) {
    acceptor.async_accept([this, &acceptor](boost::system::error_code ec, tcp::socket sock) {
      if (ec) return;
      serve(std::make_shared<tcp::socket>(std::move(sock)));
      accept(acceptor);
    });
  }

  void serve(std::shared_ptr<tcp::socket> sock) {
    auto buf = std::make_shared<beast::flat_buffer>(8192);
    auto req = std::make_shared<http::request<http::string_body>>();
    http::async_read(*sock, *buf, *req, [this, sock, buf, req](beast::error_code ec, size_t) {
      if (ec) return;
      auto res = std::make_shared<http::response<http::string_body>>(handle(*req));
      http::async_write(*sock, *res, [sock, res](beast::error_code, size_t) {
        beast::error_code ignored;
        sock->shutdown(tcp::socket::shutdown_send, ignored);
      });
    });
  }

  http::response<http::string_body> handle(const http::request<http::string_body>& req) {
    std::string target(req.target());
    std::string path = target.substr(0, target.find('?'));
    std::string query = target.find('?') == std::string::npos ? "" : target.substr(target.find('?') + 1);
    http::response<http::string_body> res{http::status::ok, req.version()};
    res.set(http::field::server, "predrop");
    res.keep_alive(false);
    auto reply = [&](http::status st, std::string type, std::string body) {
      res.result(st);
      res.set(http::field::content_type, type);
      res.body() = std::move(body);
      res.prepare_payload();
      return res;
    };
    if (req.method() != http::verb::get) return reply(http::status::method_not_allowed, "text/plain", "GET only\n");
    if (path == "/metrics") return reply(http::status::ok, "text/plain; version=0.0.4", render_metrics(ctx));
    if (path == "/healthz") return reply(http::status::ok, "text/plain", "ok\n");
    if (path == "/readyz") {
      std::string why;
      auto cfg = ctx.config();
      if (!upstream_reachable(cfg->upstream, why)) return reply(http::status::service_unavailable, "text/plain", why + "\n");
      if (ctx.capture) {
        std::string err = ctx.capture->check_store();
        if (!err.empty()) return reply(http::status::service_unavailable, "text/plain", "store not writable: " + err + "\n");
      }
      return reply(http::status::ok, "text/plain", "ready\n");
    }
    if (path == "/drops") {
      int limit = 20;
      auto pos = query.find("limit=");
      if (pos != std::string::npos) {
        try {
          limit = std::stoi(query.substr(pos + 6));
        } catch (...) {
          return reply(http::status::bad_request, "text/plain", "limit must be a number\n");
        }
      }
      if (limit < 1 || limit > 1000) return reply(http::status::bad_request, "text/plain", "limit must be 1..1000\n");
      if (!ctx.capture) return reply(http::status::service_unavailable, "text/plain", "no store configured\n");
      std::string json, err;
      if (!ctx.capture->recent_events(limit, json, err))
        return reply(http::status::service_unavailable, "text/plain", "store: " + err + "\n");
      return reply(http::status::ok, "application/json", json + "\n");
    }
    return reply(http::status::not_found, "text/plain", "not found: try /metrics /healthz /readyz /drops?limit=N\n");
  }
};

AdminServer::AdminServer(ProxyContext& ctx, const policy::Endpoint& listen) : impl_(std::make_unique<Impl>(ctx)) {
  impl_->acceptors = open_listeners(impl_->io.get_executor(), listen, "admin", asio::socket_base::max_listen_connections);
  bool loopback_only = true;
  for (auto& a : impl_->acceptors) {
    loopback_only = loopback_only && a.local_endpoint().address().is_loopback();
    impl_->accept(a);
  }
  impl_->thread = std::thread([this] { impl_->io.run(); });
  spdlog::info("admin endpoint on http://{}/metrics", listen.to_string());
  if (!loopback_only)
    spdlog::warn("admin endpoint {} is not on loopback: /metrics and /drops answer anyone who can reach it",
                 listen.to_string());
}

AdminServer::~AdminServer() { stop(); }

void AdminServer::stop() {
  if (!impl_->thread.joinable()) return;
  impl_->io.stop();
  impl_->thread.join();
}

}  // namespace predrop::proxy
