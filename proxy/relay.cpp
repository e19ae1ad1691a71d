// The relay: frames messages in both directions and forwards the bytes unchanged.
// Only Query/Parse/Bind/Execute/Close from the client and a few small server messages are
// looked at; everything else streams through in buffer-sized pieces.
#include <spdlog/spdlog.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "proxy/metrics.hpp"
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
  relaying_ = true;
  counters_ = &relay_counters();
  startup_timer_.reset();
  // The relay's own reads and writes never block: would_block sends it back to the reactor.
  boost::system::error_code ec;
  client_.socket().non_blocking(true, ec);
  upstream_->socket().non_blocking(true, ec);
  spdlog::info("session start client={} user={} database={} application_name={} tls={}", client_addr_, params_.get("user"),
               params_.get("database").empty() ? params_.get("user") : params_.get("database"),
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
  if (!p.watched || closed_ || p.closed || p.stop_reading) return;
  p.watch.arm(source(p).relay_socket(), p.backend ? &Session::on_back_readable : &Session::on_front_readable, this,
              [this] { return shared_from_this(); });
}

// A COPY's data phase: CopyOutResponse starts it on the server's side, CopyInResponse on the
// client's; CopyDone or CopyFail ends it (so do ErrorResponse and ReadyForQuery, in inspect_backend).
// COPY BOTH (replication) is left alone: its messages are waited on one by one.
void Session::note_copy(Pipe& p, char type) {
  if (p.backend) {
    if (type == 'H') {
      back_.copying = true;
      back_.copy_started_at = back_.bytes;
    } else if (type == 'G') {
      front_.copying = true;
      front_.copy_started_at = front_.bytes;
    } else if (type == 'c') {
      back_.copying = false;
    }
  } else if (type == 'c' || type == 'f') {
    front_.copying = false;
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
    if (ec || closed_ || !p.coalescing) return;
    p.edge = true;   // what is queued, below the mark
    pump(p);
  });
}

void Session::on_readable(Pipe& p, const boost::system::error_code& ec) {
  if (closed_) return;
  if (ec) return on_pipe_eof(p, ec);
  p.edge = true;
  if (p.watch.events() & (EPOLLHUP | EPOLLERR)) p.hangup = true;
  if (!p.backend && holding_ && client_left_during_hold()) return;
  pump(p);
  arm_watch(p);
}

void Session::pump(Pipe& p) {
  if (closed_ || p.closed || p.writing) return;
  // predrop's own messages need no buffer: they may leave at any message boundary, even
  // while a read waits on the other socket.
  if (!p.inject.empty() && p.scan == p.begin && p.pass_remaining == 0) return start_write(p);
  if (p.reading) return;
  if (p.held) {
    if (p.scan > p.begin) return start_write(p);
    return watch_held_client();
  }
  if (p.buf && p.end > p.scan) {
    ScanResult r = scan(p);
    if (r == ScanResult::error) return;
    if (!p.inject.empty() && p.scan == p.begin) return start_write(p);
    if (p.scan > p.begin) return start_write(p);
    if (r == ScanResult::held) return watch_held_client();
  }
  start_read(p);
}

// A client that leaves during a hold must never have its statement relayed. Nothing is read
// while holding (the buffer is not touched), so peek: a closed socket reads as 0 bytes.
// A watched client socket needs nothing more: its readiness watch stays armed and peeks.
void Session::watch_held_client() {
  if (front_.watched || watching_held_client_) return;
  watching_held_client_ = true;
  client_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this()](boost::system::error_code ec) {
    self->watching_held_client_ = false;
    if (ec || self->closed_ || !self->holding_) return;
    self->client_left_during_hold();
  });
}

bool Session::client_left_during_hold() {
  char byte;
  ssize_t n = ::recv(client_.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
    spdlog::info("session {}: client left during a hold; the held statement is discarded", client_addr_);
    close("client left during a hold");
    return true;
  }
  // More bytes are waiting (the client pipelined): they queue behind the held message.
  return false;
}

void Session::maybe_release_buffer(Pipe& p) {
  if (p.buf && p.begin == p.end && !p.held && !p.coalescing) {
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
  bool keep_buffer = p.buf || src.is_tls() || (p.backend && !owed_.empty() && !holding_);
  if (keep_buffer) return read_async(p);
  // Idle: wait for readability without holding a buffer.
  p.reading = true;
  src.socket().async_wait(tcp::socket::wait_read, [this, self, &p](boost::system::error_code ec) {
    p.reading = false;
    if (closed_) return;
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
  if (closed_) return true;
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
  if (closed_) return;
  if (!prepare_read(p)) return;  // full while held: stop reading, the client waits
  p.reading = true;
  size_t room = p.buf.capacity() - p.end;
  source(p).async_read_some(asio::buffer(p.buf.data() + p.end, room),
                            [this, self = shared_from_this(), &p, room](boost::system::error_code ec, size_t n) {
                              p.reading = false;
                              if (closed_) return;
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
      if (closed_) return;
      if (ec) return close("write failed");
      if (p.backend && close_after_inject_) return close("protocol violation");
      pump(p);
    });
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
    if (done == n) return on_written(p, n);
  }
  // The socket is full (a slow reader): the rest leaves when it drains.
  auto self = shared_from_this();
  p.writing = true;
  sink(p).async_write(asio::buffer(p.buf.data() + p.begin + done, n - done),
                      [this, self, &p, n](boost::system::error_code ec, size_t) {
                        p.writing = false;
                        if (closed_) return;
                        if (ec) return close("write failed");
                        on_written(p, n);
                      });
}

void Session::on_written(Pipe& p, size_t n) {
  p.begin += n;
  p.bytes += n;
  counters_->add_bytes(p.backend, n);
  if (client_terminated_ && !p.backend && p.begin == p.end) return close("client terminated");
  if (!p.backend && !fatal_.empty()) maybe_send_fatal();
  pump(p);
}

// How many bytes of a message must sit in the buffer before it can be decided.
// 0: stream it without looking.
size_t Session::bytes_needed(Pipe& p, char type, size_t total) {
  if (p.backend) {
    switch (type) {
      case 'Z': case 'K': case 'S': case 'C': case '1': case '2':
        return total;
      case 'R': case 'E':
        return std::min<size_t>(total, 64 * 1024);
      default:
        return 0;
    }
  }
  switch (type) {
    case 'Q': case 'P':
      // Whole, to classify it; past the inspection limit the prefix is enough to log it.
      return total <= cfg_->limits.max_inspect_bytes ? total : 0;
    case 'B': case 'E': case 'C': case 'X':
      return std::min<size_t>(total, 2 * 1024);   // the names come first
    default:
      return 0;
  }
}

void Session::remove_message(Pipe& p, size_t total) {
  std::memmove(p.buf.data() + p.scan, p.buf.data() + p.scan + total, p.end - p.scan - total);
  p.end -= total;
}

Session::ScanResult Session::scan(Pipe& p) {
  const uint64_t max_len = cfg_->limits.max_message_bytes;
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
        if (len < 4 || len > max_len) break;
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
    if (avail < wire::kHeaderLen) return ScanResult::need_more;
    char* msg = p.buf.data() + p.scan;
    char type = msg[0];
    uint32_t len = wire::read_u32(msg + 1);
    if (len < 4 || len > max_len) {
      metrics().protocol_errors.fetch_add(1);
      std::string why = "invalid message length " + std::to_string(len) + " for message type '" +
                        std::string(1, type) + "' (limits.max_message_bytes=" + std::to_string(max_len) + ")";
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
    size_t total = static_cast<size_t>(len) + 1;
    size_t need = bytes_needed(p, type, total);
    if (need == 0) {
      if (!p.backend && (type == 'Q' || type == 'P')) {
        metrics().uninspected_large_statements.fetch_add(1);
        spdlog::warn("session {}: a {}-byte statement is larger than limits.max_inspect_bytes and is relayed uninspected",
                     client_addr_, total);
      }
      counters_->add_message(p.backend);
      note_copy(p, type);
      size_t n = std::min(total, avail);
      p.scan += n;
      p.pass_remaining = total - n;
      continue;
    }
    if (avail < need) {
      // Not all here yet. Make room: flush what is decided first, grow only for an inspected whole message.
      if (p.scan > p.begin) return ScanResult::need_more;
      if (need > p.buf.capacity()) {
        Buffer larger = BufferPool::acquire_large(need);
        std::memcpy(larger.data(), p.buf.data() + p.begin, p.end - p.begin);
        p.end -= p.begin;
        p.scan = p.begin = 0;
        pool_.give_back(p.buf);
        p.buf = std::move(larger);
      }
      return ScanResult::need_more;
    }
    counters_->add_message(p.backend);
    Verdict v;
    if (p.backend) {
      v = inspect_backend(p, type, msg, total);
    } else if (p.approved) {
      p.approved = false;
      v = Verdict::forward;
    } else {
      v = inspect_frontend(p, type, msg, total);
    }
    if (closed_) return ScanResult::error;
    if (v == Verdict::hold) {
      p.held = true;
      return ScanResult::held;
    }
    if (v == Verdict::swallow) {
      remove_message(p, total);
      continue;
    }
    size_t n = std::min(total, p.end - p.scan);
    p.scan += n;
    p.pass_remaining = total - n;
  }
}

namespace {
std::string_view cstr_at(const char* body, size_t len, size_t& pos) {
  const void* nul = pos < len ? std::memchr(body + pos, '\0', len - pos) : nullptr;
  if (!nul) {
    pos = len;
    return {};
  }
  size_t n = static_cast<const char*>(nul) - (body + pos);
  std::string_view s(body + pos, n);
  pos += n + 1;
  return s;
}
}  // namespace

Session::Verdict Session::inspect_frontend(Pipe& p, char type, char* msg, size_t total) {
  const char* body = msg + wire::kHeaderLen;
  size_t avail = std::min(total, p.end - p.scan);
  size_t blen = avail - wire::kHeaderLen;
  size_t pos = 0;
  switch (type) {
    case 'Q': {
      owed_.push_back('Q');
      // A simple Query drops the unnamed statement and portal.
      if (!statements_.empty()) statements_.erase(std::string());
      if (!portals_.empty()) portals_.erase(std::string());
      std::string_view sql = cstr_at(body, blen, pos);
      auto facts = ctx_.classifier.classify(sql);
      if (!facts) return Verdict::forward;
      if (should_hold(facts)) {
        owed_.pop_back();   // counted again when it is finally relayed
        begin_hold('Q', facts);
        return Verdict::hold;
      }
      apply_search_path(*facts);
      return Verdict::forward;
    }
    case 'P': {
      owed_.push_back('P');
      std::string name(cstr_at(body, blen, pos));
      std::string_view sql = cstr_at(body, blen, pos);
      auto facts = ctx_.classifier.classify(sql);
      if (facts) statements_[name] = std::move(facts);
      else statements_.erase(name);
      return Verdict::forward;
    }
    case 'B': {
      owed_.push_back('B');
      std::string portal(cstr_at(body, blen, pos));
      std::string stmt(cstr_at(body, blen, pos));
      auto it = statements_.find(stmt);
      if (it != statements_.end()) portals_[portal] = it->second;
      else portals_.erase(portal);
      return Verdict::forward;
    }
    case 'E': {
      std::string portal(cstr_at(body, blen, pos));
      auto it = portals_.find(portal);
      if (it == portals_.end()) return Verdict::forward;
      auto facts = it->second;
      if (should_hold(facts)) {
        begin_hold('E', facts);
        return Verdict::hold;
      }
      apply_search_path(*facts);
      return Verdict::forward;
    }
    case 'C': {
      char what = blen > 0 ? body[0] : 0;
      pos = 1;
      std::string name(cstr_at(body, blen, pos));
      if (what == 'S') statements_.erase(name);
      else if (what == 'P') portals_.erase(name);
      return Verdict::forward;
    }
    case 'S':
      owed_.push_back('S');
      return Verdict::forward;
    case 'F':
      owed_.push_back('Q');
      return Verdict::forward;
    case 'X':
      client_terminated_ = true;
      return Verdict::forward;
    default:
      return Verdict::forward;
  }
}

Session::Verdict Session::inspect_backend(Pipe& p, char type, char* msg, size_t& total) {
  const char* body = msg + wire::kHeaderLen;
  size_t blen = total - wire::kHeaderLen;
  switch (type) {
    case 'R':
      if (strip_plus_ && total <= p.end - p.scan) {
        size_t new_total = wire::strip_scram_plus(msg, total);
        if (new_total != total) {
          std::memmove(msg + new_total, msg + total, p.end - p.scan - total);
          p.end -= total - new_total;
          total = new_total;
        }
      }
      return Verdict::forward;
    case 'K':
      if (blen >= 8) ctx_.registry.set_key(shared_from_this(), std::string(body, blen));
      return Verdict::forward;
    case '1':
    case '2': {
      // Replies to Parse/Bind: swallow the ones answering what predrop injected.
      char want = type == '1' ? 'P' : 'B';
      while (!owed_.empty() && owed_.front() != want && owed_.front() != (want | 0x20) && owed_.front() != 'S' &&
             owed_.front() != 'Q')
        owed_.pop_front();
      if (!owed_.empty() && (owed_.front() == want || owed_.front() == (want | 0x20))) {
        bool injected = owed_.front() == (want | 0x20);
        owed_.pop_front();
        if (injected) return Verdict::swallow;
      }
      return Verdict::forward;
    }
    case 'E':
      error_since_ready_ = true;
      front_.copying = back_.copying = false;
      // After an error the server skips to Sync: nothing before it will be answered.
      if (!owed_.empty() && owed_.front() != 'Q') {
        while (!owed_.empty() && owed_.front() != 'S') owed_.pop_front();
      }
      return Verdict::forward;
    case 'C': {
      std::string_view tag(body, blen > 0 ? blen - 1 : 0);
      if (tag == "COMMIT" || tag == "ROLLBACK" || tag == "PREPARE TRANSACTION") last_txn_tag_ = std::string(tag);
      return Verdict::forward;
    }
    case 'Z': {
      front_.copying = back_.copying = false;
      if (!owed_.empty()) {
        // A ReadyForQuery answers the oldest Sync or Query.
        while (!owed_.empty() && owed_.front() != 'S' && owed_.front() != 'Q') owed_.pop_front();
        if (!owed_.empty()) owed_.pop_front();
      }
      char status = blen >= 1 ? body[0] : 'I';
      char before = txn_status_;
      txn_status_ = status;
      // Back to idle ends a transaction: an explicit one by COMMIT/ROLLBACK, an implicit one
      // (a multi-statement Query) by committing unless it failed.
      if (status == 'I') on_transaction_end(before != 'I' ? last_txn_tag_ == "COMMIT" : !error_since_ready_);
      last_txn_tag_.clear();
      error_since_ready_ = false;
      if (!fatal_.empty()) maybe_send_fatal();
      if (status == 'I' && !pending_outcomes_.empty()) confirm_outcomes();
      return Verdict::forward;
    }
    default:
      return Verdict::forward;
  }
}

void Session::fail_client_protocol(const std::string& why) {
  fatal_ = wire::error_response("FATAL", "08P01", "predrop: " + why);
  front_.stop_reading = true;
  // Replies the server owes may never come (a pipeline without Sync): do not wait for long.
  fatal_timer_ = std::make_unique<asio::steady_timer>(executor());
  fatal_timer_->expires_after(std::chrono::seconds(2));
  fatal_timer_->async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (ec || self->fatal_.empty()) return;
    self->owed_.clear();
    self->maybe_send_fatal();
  });
  maybe_send_fatal();
}

void Session::maybe_send_fatal() {
  if (fatal_.empty() || front_.writing || front_.scan != front_.begin || !owed_.empty()) return;
  back_.inject += fatal_;
  fatal_.clear();
  close_after_inject_ = true;
  // Never re-enter a pipe from inside its own scan.
  asio::post(executor(), [self = shared_from_this()] { self->pump(self->back_); });
}

void Session::on_pipe_eof(Pipe& p, const boost::system::error_code& ec) {
  if (p.backend) {
    // The server went away. Unless the client asked for it, say so in the server's words.
    if (!client_terminated_ && !back_.writing && back_.pass_remaining == 0) {
      auto self = shared_from_this();
      auto err = std::make_shared<std::string>(wire::error_response(
          "FATAL", "08006", "predrop: the server " + cfg_->upstream.to_string() + " closed the connection unexpectedly"));
      p.closed = true;
      client_.async_write(asio::buffer(*err), [self, err](boost::system::error_code, size_t) { self->close("upstream closed"); });
      return;
    }
    return close("upstream closed");
  }
  close(ec == asio::error::eof ? "client closed" : "client connection error");
}

void Session::close(std::string_view why) {
  if (closed_) return;
  closed_ = true;
  if (hold_timer_) hold_timer_->cancel();
  if (fatal_timer_) fatal_timer_->cancel();
  for (Pipe* p : {&front_, &back_})
    if (p->coalesce_timer) p->coalesce_timer->cancel();
  if (startup_timer_) startup_timer_->cancel();
  client_.close();
  if (upstream_) upstream_->close();
  pool_.give_back(front_.buf);
  pool_.give_back(back_.buf);
  if (registered_) ctx_.registry.remove(this);
  if (relaying_) {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started_at_).count();
    spdlog::info("session end client={} user={} database={} application_name={} duration_ms={} bytes_in={} bytes_out={} reason=\"{}\"",
                 client_addr_, params_.get("user"), params_.get("database").empty() ? params_.get("user") : params_.get("database"),
                 params_.get("application_name"), ms, front_.bytes, back_.bytes, why);
  }
}

void Session::terminate_admin_shutdown() {
  if (closed_) return;
  if (!relaying_ || back_.writing || back_.pass_remaining > 0 || back_.scan < back_.end) return close("shutdown");
  auto err = std::make_shared<std::string>(
      wire::error_response("FATAL", "57P01", "terminating connection due to administrator command (predrop shutting down)"));
  back_.closed = true;
  front_.closed = true;
  client_.async_write(asio::buffer(*err), [self = shared_from_this(), err](boost::system::error_code, size_t) { self->close("shutdown"); });
}

}  // namespace predrop::proxy
