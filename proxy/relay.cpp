// The relay: frames messages in both directions and forwards them. Only Query/Parse/Bind/Execute/
// Close from the client and a few small server messages are looked at; everything else streams
// through in buffer-sized pieces. Bytes are changed in two places only: a held message is replaced
// by the hold's stand-in (a refusal, a cancel, a quarantine's substitute) and the server's replies to
// a stand-in are rewritten to what the original statement would have got; and SCRAM's -PLUS
// mechanisms are struck from a plaintext client's authentication offer (strip_plus_).
#include <spdlog/spdlog.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "proxy/metrics.hpp"
#include "proxy/console.hpp"
#include "proxy/session.hpp"

namespace predrop::proxy {

namespace {
// COPY batching (Session::coalesce): the socket's low-water mark in a batch, how much of a COPY
// goes by before batching starts (a small COPY is never delayed), and the longest a batch waits.
constexpr int kCoalesceBytes = 64 * 1024;
constexpr uint64_t kCoalesceAfter = 256 * 1024;
constexpr auto kCoalesceWait = std::chrono::microseconds(1000);
}  // namespace

void Session::start_relay() {
  state_.move_to(SessionPhase::relaying);
  counters_ = &relay_counters();
  startup_timer_.reset();
  // The relay's own reads and writes never block: would_block sends it back to the reactor.
  boost::system::error_code ec;
  client_.socket().non_blocking(true, ec);
  upstream_->socket().non_blocking(true, ec);
  spdlog::info("session start client={} user={} database={} application_name={} tls={}", client_addr_, params_.get("user"),
               database(),
               params_.get("application_name"), client_.is_tls() ? "on" : "off");
  front_.watched = ReadinessWatch::kAvailable && !client_.is_tls();
  back_.watched = ReadinessWatch::kAvailable && !upstream_->is_tls();
  // Bytes may have landed before the watches were armed.
  front_.edge = back_.edge = true;
  // An edge-triggered watch must not stop reading while an EOF waits behind the last bytes:
  // TCP_INQ reports, with each read, what is still queued (an EOF counts as one byte).
  for (Pipe* p : {&front_, &back_}) {
    int on = 1;
    p->inq = p->watched && ::setsockopt(source(*p).socket().native_handle(), SOL_TCP, TCP_INQ, &on, sizeof on) == 0;
  }
  pump(front_);
  pump(back_);
  arm_watch(front_);
  arm_watch(back_);
}

void Session::arm_watch(Pipe& p) {
  if (!p.watched || state_.closed() || p.closed || p.stop_reading) return;
  p.watch.arm(source(p).relay_socket(), p.backend ? &Session::on_back_readable : &Session::on_front_readable, this,
              [this] { return shared_from_this(); });
}

// A COPY's data phase, as the decoder follows it (CopyOutResponse or CopyInResponse starts it;
// CopyDone, CopyFail, ErrorResponse, CommandComplete or ReadyForQuery ends it). COPY BOTH
// (replication) is left alone: its messages are waited on one by one.
void Session::sync_copy_state() {
  for (Pipe* p : {&front_, &back_}) {
    bool now = p->backend ? decoder_->copy_out() : decoder_->copy_in();
    if (now && !p->copying) p->copy_started_at = p->bytes;
    p->copying = now;
  }
}

// The sender of a COPY writes 8 KB at a time (PostgreSQL's and libpq's send buffers), and a relay
// woken for each piece spends more on the wake-up, the epoll_wait and the two system calls than on
// the bytes: a 155 MB COPY OUT took 18,700 of each and 440 ms of predrop's CPU. Once a COPY has
// carried kCoalesceAfter, the source socket's low-water mark goes up to kCoalesceBytes: the kernel
// wakes the relay once per batch (and the sender skips the wake-up too), and the batch is read into
// a buffer that size. A timer reads whatever is queued after kCoalesceWait, so the COPY's last bytes,
// below the mark, wait at most that. The mark is put back before the pipe waits outside a COPY
// (lowering it wakes the socket at once if bytes are queued): no other reply is held back by it.
void Session::coalesce(Pipe& p) {
  bool want = p.copying && p.bytes - p.copy_started_at >= kCoalesceAfter;
  if (want != p.coalescing) {
    int mark = want ? kCoalesceBytes : 1;
    if (::setsockopt(source(p).socket().native_handle(), SOL_SOCKET, SO_RCVLOWAT, &mark, sizeof mark) == 0) {
      p.coalescing = want;
      if (want) (p.backend ? metrics().copy_batched_out : metrics().copy_batched_in).fetch_add(1, std::memory_order_relaxed);
      else p.coalesce_timer->cancel();   // made when batching began
    } else if (!want) {
      return close("could not reset the socket's low-water mark");
    }
  }
  if (!p.coalescing) return;
  if (!p.coalesce_timer) p.coalesce_timer = std::make_unique<asio::steady_timer>(executor());
  p.coalesce_timer->expires_after(kCoalesceWait);
  p.coalesce_timer->async_wait([this, self = shared_from_this(), &p](boost::system::error_code ec) {
    if (ec || state_.closed() || !p.coalescing) return;
    p.edge = true;   // what is queued, below the mark
    pump(p);
  });
}

void Session::on_readable(Pipe& p, const boost::system::error_code& ec) {
  if (state_.closed()) return;
  if (ec) return on_pipe_eof(p, ec);
  p.edge = true;
  if (p.watch.events() & (EPOLLHUP | EPOLLERR)) p.hangup = true;
  pump(p);
  arm_watch(p);
}

void Session::pump(Pipe& p) {
  if (state_.closed() || p.closed || p.writing) return;
  if (p.discard > 0) {
    // A held message a stand-in replaces (proxy/stand_in.hpp: a refusal, a cancel, a quarantine's
    // substitute): what came before it leaves first, then it is dropped whole (a hold only ever
    // holds a message that is whole in the buffer) and the stand-in, in `inject`, goes instead.
    if (p.scan > p.begin) return start_write(p);
    p.scan += p.discard;
    p.begin = p.scan;
    p.discard = 0;
  }
  // predrop's own messages need no buffer: they may leave at any message boundary, even
  // while a read waits on the other socket.
  if (!p.inject.empty() && p.scan == p.begin && p.pass_remaining == 0) return start_write(p);
  if (p.eof) {
    // The server has gone: what it sent is relayed as it is, then the client's connection closes.
    p.scan = p.end;
    p.pass_remaining = 0;
    if (p.scan > p.begin) return start_write(p);
    return close_with_close_notify("server closed the connection");
  }
  if (held(p)) {
    if (p.scan > p.begin) return start_write(p);
    // Reading goes on behind the held message, so that a client leaving is seen at once.
    if (client_left_behind_hold()) return;
    if (!p.reading) start_read(p);
    return;
  }
  if (p.reading) {
    // A read may be outstanding on the client's side when a hold ends: the bytes already here are
    // scanned and relayed meanwhile (scan neither moves nor replaces a buffer a read waits on).
    if (!p.backend && p.buf && p.end > p.scan && scan(p) == ScanResult::error) return;
    if (!p.inject.empty() && p.scan == p.begin && p.pass_remaining == 0) return start_write(p);
    if (p.scan > p.begin) return start_write(p);
    if (held(p)) return pump(p);
    return;
  }
  if (p.buf && p.end > p.scan) {
    ScanResult r = scan(p);
    if (r == ScanResult::error) return;
    if (!p.inject.empty() && p.scan == p.begin && p.pass_remaining == 0) return start_write(p);
    if (p.scan > p.begin) return start_write(p);
    run_after_reply();   // nothing judged goes to the client (swallowed): what is due goes now
    if (r == ScanResult::held) return pump(p);
  }
  if (p.scan > p.begin) return start_write(p);   // a released message, judged before it was held
  start_read(p);
}

// A client that leaves during a hold never has its statement relayed: a Terminate already read
// behind the held message ends the hold (end of stream and TLS close_notify end it in on_pipe_eof).
bool Session::client_left_behind_hold() {
  Pipe& p = front_;
  size_t at = p.scan + hold_.held_bytes();
  while (p.end >= at + wire::kHeaderLen) {
    if (p.buf.data()[at] == 'X') {
      hold_.client_gone();
      return true;
    }
    uint32_t len = wire::read_u32(p.buf.data() + at + 1);
    if (len < 4) return false;   // judged, and refused, once the hold is over
    at += static_cast<size_t>(len) + 1;
  }
  return false;
}

void Session::maybe_release_buffer(Pipe& p) {
  if (p.buf && p.begin == p.end && !held(p) && !p.coalescing && !p.reading) {
    pool_.give_back(p.buf);
    p.begin = p.scan = p.end = 0;
  }
}

// Plaintext legs read and write with non-blocking calls made on the spot: each asio completion
// would be queued and cost one more epoll_wait before it runs, and the c=1 round trip is made of
// nothing but these hops. The socket is only waited on when it has nothing to give or take.
void Session::start_read(Pipe& p) {
  Transport& src = source(p);
  if (p.stop_reading) return maybe_release_buffer(p);
  if (p.watched) {
    // The watch announces new bytes; more_waiting: the last read left bytes or an EOF queued;
    // hangup: read until the reset or EOF shows, since no further edge will announce it.
    if (p.edge || p.more_waiting || p.hangup) {
      p.edge = p.more_waiting = false;
      if (read_now(p)) return;
    }
    coalesce(p);
    return maybe_release_buffer(p);
  }
  // A full last read means more is probably waiting (a COPY, a large result): read again now.
  if (p.more_waiting && p.buf && !src.is_tls()) {
    p.more_waiting = false;
    if (read_now(p)) return;
  }
  maybe_release_buffer(p);
  auto self = shared_from_this();
  // While the server owes replies, wait with a buffer: the reactor reads as soon as the bytes land.
  // A TLS source always reads through its stream: whole records may wait in asio's and OpenSSL's
  // buffers (beyond what SSL_pending counts) with nothing left on the socket to wake a readiness
  // wait; waiting on the socket then hung a paced COPY IN over TLS in about one run in three.
  bool keep_buffer = p.buf || src.is_tls() || (p.backend && decoder_->replies_owed() && !hold_.active());
  if (keep_buffer) return read_async(p);
  // Idle: wait for readability without holding a buffer.
  p.reading = true;
  src.socket().async_wait(tcp::socket::wait_read, [this, self, &p](boost::system::error_code ec) {
    p.reading = false;
    if (state_.closed()) return;
    if (ec) return on_pipe_eof(p, ec);
    if (!read_now(p)) start_read(p);
  });
}

// Makes room at the end of the buffer; false when it is full (held: the client waits).
bool Session::prepare_read(Pipe& p) {
  // A batched COPY reads a whole batch at once, in a buffer of its own for as long as it lasts.
  if (p.coalescing && p.buf.capacity() < static_cast<size_t>(kCoalesceBytes) && p.begin == p.end) {
    pool_.give_back(p.buf);
    p.begin = p.scan = p.end = 0;
    p.buf = BufferPool::acquire_large(kCoalesceBytes);
  }
  if (!p.buf) p.buf = pool_.acquire();
  // Move undecided bytes to the front so a whole message can be assembled.
  if (p.begin > 0) {
    std::memmove(p.buf.data(), p.buf.data() + p.begin, p.end - p.begin);
    p.scan -= p.begin;
    p.end -= p.begin;
    p.begin = 0;
  }
  return p.end < p.buf.capacity();
}

// One non-blocking read on a plaintext socket. true: it was handled (bytes pumped, end of stream
// or a full buffer); false: nothing there yet, and the caller goes back to waiting.
bool Session::read_now(Pipe& p) {
  if (state_.closed()) return true;
  if (!prepare_read(p)) {
    p.edge = p.watched;   // full while held: read when it is released
    return true;
  }
  size_t room = p.buf.capacity() - p.end;
  iovec iov{p.buf.data() + p.end, room};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (p.inq) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
  }
  ssize_t got;
  do got = ::recvmsg(source(p).socket().native_handle(), &msg, 0);
  while (got < 0 && errno == EINTR);
  if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    maybe_release_buffer(p);
    return false;
  }
  if (got <= 0) {
    on_pipe_eof(p, got == 0 ? boost::system::error_code(asio::error::eof)
                            : boost::system::error_code(errno, boost::system::system_category()));
    return true;
  }
  size_t n = static_cast<size_t>(got);
  p.end += n;
  if (p.inq) {
    int queued = 1;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
      if (c->cmsg_level == SOL_TCP && c->cmsg_type == TCP_CM_INQ) std::memcpy(&queued, CMSG_DATA(c), sizeof queued);
    p.more_waiting = queued > 0;
  } else {
    // Without TCP_INQ a watched socket is read until it says EAGAIN.
    p.more_waiting = p.watched || n == room;
  }
  pump(p);
  return true;
}

void Session::read_async(Pipe& p) {
  if (state_.closed()) return;
  if (!prepare_read(p)) return;  // full while held: stop reading, the client waits
  p.reading = true;
  size_t room = p.buf.capacity() - p.end;
  source(p).async_read_some(asio::buffer(p.buf.data() + p.end, room),
                            [this, self = shared_from_this(), &p, room](boost::system::error_code ec, size_t n) {
                              p.reading = false;
                              if (state_.closed()) return;
                              if (ec) return on_pipe_eof(p, ec);
                              p.end += n;
                              p.more_waiting = n == room;
                              pump(p);
                            });
}

void Session::start_write(Pipe& p) {
  if (!p.inject.empty() && p.scan == p.begin) {
    auto self = shared_from_this();
    p.writing = true;
    auto bytes = std::make_shared<std::string>(std::move(p.inject));
    p.inject.clear();
    sink(p).async_write(asio::buffer(*bytes), [this, self, &p, bytes](boost::system::error_code ec, size_t) {
      p.writing = false;
      if (state_.closed()) return;
      if (ec) return close("write failed");
      if (p.backend && close_after_inject_) return close("protocol violation");
      pump(p);
    });
    run_after_reply();
    return;
  }
  size_t n = p.scan - p.begin;
  size_t done = 0;
  if (!sink(p).is_tls()) {
    ssize_t sent;
    do sent = ::send(sink(p).socket().native_handle(), p.buf.data() + p.begin, n, MSG_NOSIGNAL);
    while (sent < 0 && errno == EINTR);
    if (sent < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return close("write failed");
    done = sent < 0 ? 0 : static_cast<size_t>(sent);
    if (done == n) {
      run_after_reply();
      return on_written(p, n);
    }
  }
  // The socket is full (a slow reader): the rest leaves when it drains.
  auto self = shared_from_this();
  p.writing = true;
  sink(p).async_write(asio::buffer(p.buf.data() + p.begin + done, n - done),
                      [this, self, &p, n](boost::system::error_code ec, size_t) {
                        p.writing = false;
                        if (state_.closed()) return;
                        if (ec) return close("write failed");
                        on_written(p, n);
                      });
  run_after_reply();
}

void Session::on_written(Pipe& p, size_t n) {
  p.begin += n;
  p.bytes += n;
  counters_->add_bytes(p.backend, n);
  if (client_terminated_ && !p.backend && p.begin == p.end) return close("client terminated");
  if (!p.backend && !fatal_.empty()) maybe_send_fatal();
  pump(p);
}

void Session::remove_message(Pipe& p, size_t total) {
  std::memmove(p.buf.data() + p.scan, p.buf.data() + p.scan + total, p.end - p.scan - total);
  p.end -= total;
}

// A server message rewritten in place to `new_total` bytes (never longer): the rest moves up.
void Session::shrink_message(Pipe& p, size_t total, size_t new_total) {
  char* msg = p.buf.data() + p.scan;
  std::memmove(msg + new_total, msg + total, p.end - p.scan - total);
  p.end -= total - new_total;
}

Session::ScanResult Session::scan(Pipe& p) {
  const FrameLimits limits{cfg_->limits.max_message_bytes, cfg_->limits.max_inspect_bytes};
  const MessageTable& table = p.backend ? backend_table() : frontend_table();
  if (p.stop_reading) return ScanResult::need_more;
  for (;;) {
    if (p.pass_remaining > 0) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(p.pass_remaining, p.end - p.scan));
      p.scan += n;
      p.pass_remaining -= n;
      if (p.pass_remaining > 0) return ScanResult::need_more;
    }
    // A COPY's rows are CopyData messages with nothing to decide: walk a run of them with nothing but
    // the header arithmetic (a 150 MB COPY OUT is two million of them). Anything else, or a bad
    // length, is left to the general path below.
    if (p.copying) {
      const char* base = p.buf.data();
      size_t at = p.scan;
      uint64_t rows = 0;
      while (p.end - at >= wire::kHeaderLen && base[at] == 'd') {
        uint32_t len = wire::read_u32(base + at + 1);
        if (len < 4 || len > limits.max_message_bytes) break;
        ++rows;
        size_t total = static_cast<size_t>(len) + 1;
        if (total > p.end - at) {
          p.pass_remaining = total - (p.end - at);
          at = p.end;
          break;
        }
        at += total;
      }
      p.scan = at;
      if (rows) counters_->add_messages(p.backend, rows);
      if (p.pass_remaining > 0) return ScanResult::need_more;
    }
    size_t avail = p.end - p.scan;
    char* msg = p.buf.data() + p.scan;
    Frame f = frame_message(table, msg, avail, limits);
    switch (f.kind) {
      case Frame::Kind::bad_length: {
        metrics().protocol_errors.fetch_add(1);
        std::string why = "invalid message length " + std::to_string(f.length) + " for message type '" +
                          std::string(1, f.type) + "' (limits.max_message_bytes=" + std::to_string(limits.max_message_bytes) + ")";
        spdlog::warn("session {}: {}", client_addr_, why);
        if (!p.backend) {
          // The stream cannot be resynchronised. What came before the bad header still goes up
          // and is answered, as the server would do; then the client hears why and is closed.
          fail_client_protocol(why);
          return ScanResult::need_more;
        }
        close("protocol violation from upstream");
        return ScanResult::error;
      }
      case Frame::Kind::incomplete:
        // Not all here yet. Make room: flush what is decided first, grow only for a message judged
        // whole, and never while a read waits on this buffer.
        if (p.scan > p.begin || p.reading) return ScanResult::need_more;
        if (f.need > p.buf.capacity()) {
          Buffer larger = BufferPool::acquire_large(f.need);
          std::memcpy(larger.data(), p.buf.data() + p.begin, p.end - p.begin);
          p.end -= p.begin;
          p.scan = p.begin = 0;
          pool_.give_back(p.buf);
          p.buf = std::move(larger);
        }
        return ScanResult::need_more;
      case Frame::Kind::stream: {
        counters_->add_message(p.backend);
        if (p.backend) {
          decoder_->on_backend_streamed(f.type, f.total);
        } else {
          if (f.over_inspect_limit) {
            metrics().uninspected_large_statements.fetch_add(1);
            spdlog::warn("session {}: a {}-byte {} is larger than limits.max_inspect_bytes and is relayed uninspected",
                         client_addr_, f.total, frontend_table()[static_cast<unsigned char>(f.type)].name);
          }
          decoder_->on_frontend_streamed(f.type, f.total, f.over_inspect_limit);
          if (f.type == 'X') client_terminated_ = true;
        }
        sync_copy_state();
        size_t n = static_cast<size_t>(std::min<uint64_t>(f.total, avail));
        p.scan += n;
        p.pass_remaining = f.total - n;
        continue;
      }
      case Frame::Kind::judge:
        break;
    }
    counters_->add_message(p.backend);
    // A Parse or Bind longer than limits.max_inspect_bytes is judged on its first bytes, where its
    // names are; the rest (a Parse's text, a Bind's parameters) streams through.
    size_t judged = static_cast<size_t>(f.need);
    size_t total = static_cast<size_t>(f.total);
    Verdict v = p.backend ? judge_backend(p, msg, total) : judge_frontend(std::string_view(msg, judged), f.total);
    if (state_.closed()) return ScanResult::error;
    sync_copy_state();
    if (v == Verdict::hold) return ScanResult::held;
    if (v == Verdict::stop) return ScanResult::need_more;
    if (v == Verdict::swallow) {
      remove_message(p, total);
      continue;
    }
    if (v == Verdict::replace) {
      // Its replacement (longer) waits in p.inject: what was decided before it leaves first, then
      // the replacement, then scanning goes on.
      remove_message(p, total);
      return ScanResult::need_more;
    }
    size_t n = static_cast<size_t>(std::min<uint64_t>(total, avail));
    p.scan += n;
    p.pass_remaining = total - n;
  }
}

Session::Verdict Session::judge_frontend(std::string_view msg, uint64_t total) {
  FrontendEvent ev = decoder_->on_frontend(msg, total);
  if (ev.uninspected) {
    metrics().uninspected_large_statements.fetch_add(1);
    spdlog::warn("session {}: a {}-byte {} is larger than limits.max_inspect_bytes and is relayed uninspected",
                 client_addr_, total, frontend_table()[static_cast<unsigned char>(ev.type)].name);
  }
  switch (ev.kind) {
    case FrontendEvent::Kind::malformed:
      metrics().protocol_errors.fetch_add(1);
      spdlog::warn("session {}: {}", client_addr_, ev.error);
      fail_client_protocol(ev.error);
      return Verdict::stop;
    case FrontendEvent::Kind::statement:
      if (!should_hold(ev.facts)) return Verdict::forward;
      begin_hold(ev.type, std::move(ev.facts), msg.size());
      return Verdict::hold;
    default:
      return Verdict::forward;
  }
}

Session::Verdict Session::judge_backend(Pipe& p, char* msg, size_t& total) {
  BackendEvent ev = decoder_->on_backend(std::string_view(msg, total));
  if (ev.kind == BackendEvent::Kind::malformed) {
    metrics().protocol_errors.fetch_add(1);
    spdlog::warn("session {}: upstream sent {}", client_addr_, ev.error);
    close("protocol violation from upstream");
    return Verdict::stop;
  }
  if (ev.desync) metrics().protocol_desync.fetch_add(1, std::memory_order_relaxed);
  if (ev.kind == BackendEvent::Kind::swallow) {
    if (!ev.substitute_warning.empty()) note_substitute_fallback(ev.substitute_warning);
    return Verdict::swallow;
  }
  if (ev.substitute || ev.refusal_error) {
    // The server's answer to a stand-in (proxy/stand_in.hpp), less what only the stand-in has.
    StandInReply reply = stand_in_reply(ev, msg, total);
    if (reply.replacement) {
      p.inject += *reply.replacement;
      return Verdict::replace;
    }
    if (reply.total != total) shrink_message(p, total, reply.total), total = reply.total;
  }
  if (ev.sasl_offer && strip_plus_) {
    size_t new_total = wire::strip_scram_plus(msg, total);
    if (new_total != total) shrink_message(p, total, new_total), total = new_total;
  }
  if (ev.backend_key) ctx_.registry.set_key(shared_from_this(), ev.key);
  if (ev.ready) {
    if (!fatal_.empty()) maybe_send_fatal();
    std::optional<std::string> prepared = decoder_->transactions().take_prepared_gid();
    if (ev.status == 'I' && decoder_->transactions().has_outcome_checks()) {
      // A prepared transaction's DROPs have not happened yet: their check waits for its end.
      if (prepared) {
        ctx_.prepared_outcomes.put(outcome_database(), *prepared, decoder_->transactions().take_outcome_checks());
      } else {
        confirm_outcomes();
      }
    }
    // Both go to the capture service once the ReadyForQuery is on its way (run_after_reply).
    if (decoder_->transactions().has_shape_outcomes()) capture_afters();
  }
  return Verdict::forward;
}

void Session::fail_client_protocol(const std::string& why) {
  fatal_ = wire::error_response("FATAL", "08P01", "predrop: " + why);
  front_.stop_reading = true;
  // Replies the server owes may never come (a pipeline without Sync): do not wait for long.
  fatal_timer_ = std::make_unique<asio::steady_timer>(executor());
  fatal_timer_->expires_after(std::chrono::seconds(2));
  fatal_timer_->async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (ec || self->fatal_.empty()) return;
    self->fatal_due_ = true;
    self->maybe_send_fatal();
  });
  maybe_send_fatal();
}

void Session::maybe_send_fatal() {
  if (fatal_.empty() || front_.writing || front_.scan != front_.begin || (!fatal_due_ && decoder_->replies_owed())) return;
  back_.inject += fatal_;
  fatal_.clear();
  close_after_inject_ = true;
  // Never re-enter a pipe from inside its own scan.
  asio::post(executor(), [self = shared_from_this()] { self->pump(self->back_); });
}

void Session::on_pipe_eof(Pipe& p, const boost::system::error_code& ec) {
  if (p.backend) {
    // The server ended the session (a FATAL it sent, or without a word): the client gets exactly
    // what the server sent, then the end of its connection, as it would direct.
    p.eof = true;
    return pump(p);
  }
  if (hold_.active()) return hold_.client_gone();
  close(ec == asio::error::eof ? "client closed" : "client connection error");
}

// TLS on the client's leg ends with a close_notify, as the server's own TLS does (after its last
// word in a session or in a startup it refuses); then the socket closes. A client that never
// answers the close_notify is let go after a second.
void Session::close_with_close_notify(const char* why) {
  if (state_.closed()) return;
  auto* tls = client_.tls();
  if (!tls) return close(why);
  back_.closed = true;
  front_.closed = true;
  auto self = shared_from_this();
  fatal_timer_ = std::make_unique<asio::steady_timer>(executor());
  fatal_timer_->expires_after(std::chrono::seconds(1));
  fatal_timer_->async_wait([self, why](boost::system::error_code ec) {
    if (!ec) self->close(why);
  });
  tls->async_shutdown([self, why](boost::system::error_code) { self->close(why); });
}

void Session::close(std::string_view why) {
  if (state_.closed()) return;
  run_after_reply();   // judged before the end: the capture service still takes it
  const SessionPhase was = state_.move_to(SessionPhase::closed);
  hold_.stop();
  // Outcomes never confirmed (the session ended inside its transaction) still have their hold_ms.
  if (ctx_.capture && decoder_)
    for (const auto& p : decoder_->transactions().take_outcome_checks())
      if (p.hold_ms) {
        capture::TableResult t;
        t.outcome = p.wrote_snapshot ? capture::SnapshotOutcome::written : capture::SnapshotOutcome::deduplicated;
        t.snapshot_id = p.snapshot_id;
        t.event_id = p.event_id;
        ctx_.capture->mark_hold({t}, *p.hold_ms);
      }
  if (fatal_timer_) fatal_timer_->cancel();
  for (Pipe* p : {&front_, &back_})
    if (p->coalesce_timer) p->coalesce_timer->cancel();
  if (startup_timer_) startup_timer_->cancel();
  client_.close();
  if (upstream_) upstream_->close();
  pool_.give_back(front_.buf);
  pool_.give_back(back_.buf);
  if (registered_) ctx_.registry.remove(this);
  if (was == SessionPhase::relaying) {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started_at_).count();
    spdlog::info("session end client={} user={} database={} application_name={} duration_ms={} bytes_in={} bytes_out={} reason=\"{}\"",
                 client_addr_, params_.get("user"), database(),
                 params_.get("application_name"), ms, front_.bytes, back_.bytes, why);
  }
}

void Session::terminate_admin_shutdown() {
  if (state_.closed()) return;
  if (auto console = console_handler_.lock()) return console_terminate_admin_shutdown(console);
  if (!state_.relaying() || back_.writing || back_.pass_remaining > 0 || back_.scan < back_.end) return close("shutdown");
  auto err = std::make_shared<std::string>(
      wire::error_response("FATAL", "57P01", "terminating connection due to administrator command (predrop shutting down)"));
  back_.closed = true;
  front_.closed = true;
  client_.async_write(asio::buffer(*err), [self = shared_from_this(), err](boost::system::error_code, size_t) { self->close("shutdown"); });
}

}  // namespace predrop::proxy
