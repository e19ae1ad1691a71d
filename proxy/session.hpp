// One client connection and its upstream connection. Its phase (startup, relaying, console,
// closed) is a SessionState (proxy/session_state.hpp); while relaying it may hold (proxy/hold.hpp).
#pragma once

#include <boost/asio.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "proxy/buffer_pool.hpp"
#include "proxy/context.hpp"
#include "proxy/decoder.hpp"
#include "proxy/hold.hpp"
#include "proxy/metrics.hpp"
#include "proxy/readiness.hpp"
#include "proxy/session_state.hpp"
#include "proxy/startup_negotiation.hpp"
#include "proxy/transport.hpp"
#include "proxy/wire.hpp"

namespace predrop::proxy {

// One direction of the relay. Bytes in buf[begin, scan) are decided and wait to be written;
// buf[scan, end) are not yet looked at. Reading stops while anything waits to be written
// (backpressure: a slow reader slows its writer). While a statement is held the client's side
// reads on into what is left of its buffer, so that a client leaving is seen; it never grows.
struct Pipe {
  explicit Pipe(bool server_to_client) : backend(server_to_client) {}
  bool backend = false;          // server → client
  Buffer buf;
  size_t begin = 0, scan = 0, end = 0;
  uint64_t pass_remaining = 0;   // rest of a message being streamed through unexamined
  bool reading = false, writing = false, closed = false;
  // While the session's hold is active, the front pipe's message at scan (whole) waits for it.
  uint64_t discard = 0;          // frontend only: the message at scan is dropped once what precedes it is written
  bool eof = false;              // backend only: the server closed; relay what it sent, then close
  std::string inject;            // bytes predrop itself sends before going on
  bool stop_reading = false;     // the stream is beyond repair: relay what was decided, read no more
  bool more_waiting = false;     // the last read filled the buffer: the socket probably has more
  // Plaintext sources are watched by a ReadinessWatch that stays armed while relaying: one
  // completion per edge, and `edge` remembers it until the pipe can read again.
  bool watched = false;
  bool edge = false;
  bool hangup = false;           // the watch saw EPOLLHUP/EPOLLERR: read until the error shows
  bool inq = false;              // TCP_INQ tells after each read whether bytes or an EOF still wait
  ReadinessWatch watch;
  uint64_t bytes = 0;
  // The data phase of a COPY on this pipe (COPY OUT from the server, COPY IN from the client):
  // nobody waits on its bytes one by one, so its reads may be batched (Session::coalesce).
  bool copying = false;
  uint64_t copy_started_at = 0;  // `bytes` when the COPY began
  bool coalescing = false;       // SO_RCVLOWAT is raised on the source socket
  std::unique_ptr<asio::steady_timer> coalesce_timer;   // made at the first batched COPY
};

// What the console shows of one session (SHOW SESSIONS, SHOW HOLDS); read on the session's thread.
struct SessionView {
  uint64_t id = 0;
  std::string user, database, application_name, client_addr;
  bool tls = false;
  std::string state;            // startup, idle, active, idle in transaction, holding, console
  double connected_s = 0;
  uint64_t bytes_in = 0, bytes_out = 0;   // from the client, from the server
  uint64_t holds = 0;           // so far
  bool holding = false;         // then:
  double waited_ms = 0;
  std::string statement;        // normalised, without literals (as the ledger has it)
  std::string tables;
};

class Session final : public std::enable_shared_from_this<Session>, private HoldHost {
 public:
  Session(ProxyContext& ctx, tcp::socket client, BufferPool& pool);
  ~Session();
  void start();
  // A CancelRequest carried this session's key.
  // done runs once the cancel has reached the server (or ended a hold here).
  void on_cancel_request(std::string packet, std::function<void()> done);
  // Shutdown drain is over: tell the client and close.
  void terminate_admin_shutdown();
  asio::any_io_executor executor() { return client_.socket().get_executor(); }
  // nullopt once closed. Call on the session's executor.
  std::optional<SessionView> view() const;

 private:
  using Clock = std::chrono::steady_clock;

  // startup.cpp
  void detect_direct_tls();
  void start_direct_tls();
  void read_startup_length();
  void read_startup_body(uint32_t len);
  void on_startup_packet(std::string packet);
  void answer_ssl_request();
  void answer_negotiation(char answer);
  void relay_renamed_refusal(std::shared_ptr<std::string> reply);
  void handle_cancel_packet(const std::string& packet);
  void connect_upstream();
  void on_upstream_tcp(const boost::system::error_code& ec);
  void on_upstream_connected();
  void negotiate_upstream_tls();
  void send_startup_upstream();
  // before: bytes the server would send ahead of the error (its answer to an SSLRequest).
  void fail_startup(std::string_view sqlstate, std::string message, std::string_view detail = {}, std::string before = {});
  void startup_protocol_error(const std::string& what);   // logged and counted; the client is told nothing
  void relay_server_refusal();
  bool asks_for_console(const wire::StartupParams& startup) const;
  void start_console(wire::StartupParams startup);

  // relay.cpp
  void start_relay();
  void pump(Pipe& p);
  void start_read(Pipe& p);
  bool prepare_read(Pipe& p);
  bool read_now(Pipe& p);
  void read_async(Pipe& p);
  void start_write(Pipe& p);
  void on_written(Pipe& p, size_t n);
  enum class ScanResult { need_more, held, error };
  ScanResult scan(Pipe& p);
  // forward: relay it; hold: it waits, whole, at scan; swallow: remove it; stop: the pipe reads no
  // more; replace: remove it, its replacement is in the pipe's inject.
  enum class Verdict { forward, hold, swallow, stop, replace };
  // msg: the whole message, or for a Parse or Bind past limits.max_inspect_bytes its first bytes.
  Verdict judge_frontend(std::string_view msg, uint64_t total);
  Verdict judge_backend(Pipe& p, char* msg, size_t& total);
  void remove_message(Pipe& p, size_t total);
  void shrink_message(Pipe& p, size_t total, size_t new_total);
  void on_pipe_eof(Pipe& p, const boost::system::error_code& ec);
  void close_with_close_notify(const char* why);
  void fail_client_protocol(const std::string& why);
  void maybe_send_fatal();
  void close(std::string_view why);
  void maybe_release_buffer(Pipe& p);
  bool client_left_behind_hold();
  void arm_watch(Pipe& p);
  void on_readable(Pipe& p, const boost::system::error_code& ec);
  void sync_copy_state();
  void coalesce(Pipe& p);
  static void on_front_readable(void* s, const boost::system::error_code& ec) {
    static_cast<Session*>(s)->on_readable(static_cast<Session*>(s)->front_, ec);
  }
  static void on_back_readable(void* s, const boost::system::error_code& ec) {
    static_cast<Session*>(s)->on_readable(static_cast<Session*>(s)->back_, ec);
  }
  bool held(const Pipe& p) const { return !p.backend && hold_.active(); }
  Transport& source(Pipe& p) { return p.backend ? *upstream_ : client_; }
  Transport& sink(Pipe& p) { return p.backend ? client_ : *upstream_; }

  // session_hold.cpp
  bool should_hold(const std::shared_ptr<const parser::Facts>& facts);
  void begin_hold(char type, std::shared_ptr<const parser::Facts> facts, size_t total);
  asio::any_io_executor hold_executor() override;
  std::weak_ptr<void> hold_lifetime() override;
  void hold_ended(HoldEnd end) override;
  void confirm_outcomes();
  // Capture work a ReadyForQuery makes due (outcome checks, afters) is taken from the decoder, and
  // parked or unparked for prepared transactions, when that message is judged; it is handed to the
  // capture service only once the reply has been sent to the client: each hand-off wakes the
  // capture thread, and the client's round trip should not wait on that (issue 21: 0.03 to 0.06 ms
  // on each CREATE at c=1).
  void run_after_reply();
  std::string outcome_database() const;   // where this session's holds captured
  // The database the server connects the session to: the startup packet's, else the user's name.
  std::string database() const;
  // The substitute of a quarantined statement ran it for real: why, for the log and the ledger.
  void note_substitute_fallback(const std::string& why);
  // after.cpp
  void capture_afters();
  capture::StatementContext statement_context(const parser::Facts& facts) const;

  ProxyContext& ctx_;
  RelayCounters* counters_ = nullptr;   // its loop thread's, from start_relay on (a session never changes thread)
  std::shared_ptr<const policy::Config> cfg_;   // the policy in force when the session started
  BufferPool& pool_;
  Transport client_;
  uint64_t id_;   // names the session to capture: a hold absorbs only its own session's afters by name
  std::unique_ptr<Transport> upstream_;
  std::unique_ptr<asio::steady_timer> startup_timer_;   // gone once relaying: idle sessions stay small
  Pipe front_{false};
  Pipe back_{true};
  std::vector<std::function<void()>> after_reply_;   // see run_after_reply
  std::string startup_packet_;
  wire::StartupParams params_;
  std::string client_addr_;
  Clock::time_point started_at_ = Clock::now();
  SessionState state_;
  StartupNegotiation negotiation_;
  bool server_answers_startup_ = false;        // a startup the server refuses: its answer is relayed whole
  std::weak_ptr<Console> console_handler_;
  bool client_terminated_ = false;
  bool strip_plus_ = false;
  bool registered_ = false;
  std::string fatal_;                 // an ErrorResponse waiting for the server's owed replies
  bool fatal_due_ = false;            // waited long enough for them: send it at the next boundary
  bool close_after_inject_ = false;
  std::unique_ptr<asio::steady_timer> fatal_timer_;

  // The protocol state, read off the wire (made when the startup packet is read).
  std::optional<Decoder> decoder_;
  Hold hold_{*this};
};

}  // namespace predrop::proxy
