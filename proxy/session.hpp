// One client connection and its upstream connection.
// startup → authenticating → ready ⇄ (relaying | holding) → closing.
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
#include "proxy/metrics.hpp"
#include "proxy/readiness.hpp"
#include "proxy/transport.hpp"
#include "proxy/wire.hpp"

namespace predrop::proxy {

// The replies the server owes, oldest first. A string with a moving head: an idle session holds
// nothing on the heap (std::deque allocates a 512-byte block up front, per session).
class OwedReplies {
 public:
  bool empty() const { return head_ == q_.size(); }
  char front() const { return q_[head_]; }
  void push_back(char c) { q_.push_back(c); }
  void pop_back() { q_.pop_back(); if (empty()) clear(); }
  void pop_front() { if (++head_ == q_.size()) clear(); }
  void clear() { q_.clear(); head_ = 0; }

 private:
  std::string q_;
  size_t head_ = 0;
};

// One direction of the relay. Bytes in buf[begin, scan) are decided and wait to be written;
// buf[scan, end) are not yet looked at. Reading stops while anything waits to be written
// (backpressure: a slow reader slows its writer) and while a statement is held.
struct Pipe {
  explicit Pipe(bool server_to_client) : backend(server_to_client) {}
  bool backend = false;          // server → client
  Buffer buf;
  size_t begin = 0, scan = 0, end = 0;
  uint64_t pass_remaining = 0;   // rest of a message being streamed through unexamined
  bool reading = false, writing = false, closed = false;
  bool held = false;             // frontend only: the message at scan waits for its snapshot
  bool approved = false;         // the message at scan was held and released: relay it as is
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

class Session : public std::enable_shared_from_this<Session> {
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

 private:
  friend class HoldLogic;
  using Clock = std::chrono::steady_clock;

  // startup.cpp
  void read_startup_length();
  void read_startup_body(uint32_t len);
  void on_startup_packet(std::string packet);
  void answer_ssl_request();
  void handle_cancel_packet(const std::string& packet);
  void connect_upstream();
  void on_upstream_tcp(const boost::system::error_code& ec);
  void on_upstream_connected();
  void negotiate_upstream_tls();
  void send_startup_upstream();
  void fail_startup(std::string_view sqlstate, std::string message);

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
  size_t bytes_needed(Pipe& p, char type, size_t total);
  enum class Verdict { forward, hold, swallow };
  Verdict inspect_frontend(Pipe& p, char type, char* msg, size_t total);
  Verdict inspect_backend(Pipe& p, char type, char* msg, size_t& total);
  void remove_message(Pipe& p, size_t total);
  void on_pipe_eof(Pipe& p, const boost::system::error_code& ec);
  void fail_client_protocol(const std::string& why);
  void maybe_send_fatal();
  void close(std::string_view why);
  void maybe_release_buffer(Pipe& p);
  void watch_held_client();
  bool client_left_during_hold();
  void arm_watch(Pipe& p);
  void on_readable(Pipe& p, const boost::system::error_code& ec);
  void note_copy(Pipe& p, char type);
  void coalesce(Pipe& p);
  static void on_front_readable(void* s, const boost::system::error_code& ec) {
    static_cast<Session*>(s)->on_readable(static_cast<Session*>(s)->front_, ec);
  }
  static void on_back_readable(void* s, const boost::system::error_code& ec) {
    static_cast<Session*>(s)->on_readable(static_cast<Session*>(s)->back_, ec);
  }
  Transport& source(Pipe& p) { return p.backend ? *upstream_ : client_; }
  Transport& sink(Pipe& p) { return p.backend ? client_ : *upstream_; }

  // hold.cpp
  bool should_hold(const std::shared_ptr<const parser::Facts>& facts);
  void begin_hold(char type, std::shared_ptr<const parser::Facts> facts);
  void on_capture_done(uint64_t hold_id, capture::SnapshotResult result);
  void on_hold_timeout(uint64_t hold_id);
  void release_hold(bool proceed, std::string_view sqlstate, std::string message);
  void apply_search_path(const parser::Facts& facts);
  void on_transaction_end(bool committed);
  void confirm_outcomes();
  capture::StatementContext statement_context(const parser::Facts& facts) const;
  void record_ledger(capture::StatementContext context, capture::SnapshotOutcome outcome, std::string schema = {},
                     std::string table = {});

  ProxyContext& ctx_;
  RelayCounters* counters_ = nullptr;   // its loop thread's, from start_relay on (a session never changes thread)
  std::shared_ptr<const policy::Config> cfg_;   // the policy in force when the session started
  BufferPool& pool_;
  Transport client_;
  std::unique_ptr<Transport> upstream_;
  std::unique_ptr<asio::steady_timer> startup_timer_;   // gone once relaying: idle sessions stay small
  Pipe front_{false};
  Pipe back_{true};
  std::string startup_packet_;
  wire::StartupParams params_;
  std::string client_addr_;
  Clock::time_point started_at_ = Clock::now();
  bool relaying_ = false;
  bool closed_ = false;
  bool client_terminated_ = false;
  bool strip_plus_ = false;
  bool registered_ = false;
  std::string fatal_;                 // an ErrorResponse waiting for the server's owed replies
  bool close_after_inject_ = false;
  bool watching_held_client_ = false;
  std::unique_ptr<asio::steady_timer> fatal_timer_;

  // Statement and transaction state, read off the wire.
  char txn_status_ = 'I';
  std::string last_txn_tag_;
  bool error_since_ready_ = false;
  std::unordered_map<std::string, std::shared_ptr<const parser::Facts>> statements_;  // Parse name → facts
  std::unordered_map<std::string, std::shared_ptr<const parser::Facts>> portals_;     // Bind portal → facts
  std::unique_ptr<parser::SearchPathTracker> search_path_;
  // Replies the server owes for relayed messages, in order: P(arse) B(ind) S(ync) Q(uery);
  // lower case for the ones predrop injected, whose replies the client must not see.
  OwedReplies owed_;

  // The hold.
  uint64_t hold_seq_ = 0;
  bool holding_ = false;
  char held_type_ = 0;
  bool fail_closed_ = false;
  Clock::time_point hold_started_;
  std::shared_ptr<const parser::Facts> held_facts_;
  // Allocated on the first hold: most sessions never hold, and an idle session should cost little.
  std::unique_ptr<capture::StatementContext> held_ctx_;
  std::unique_ptr<asio::steady_timer> hold_timer_;
  std::vector<capture::PendingOutcome> pending_outcomes_;
};

}  // namespace predrop::proxy
