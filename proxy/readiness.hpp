// Readiness of a plaintext relay socket, re-armed without a system call.
//
// asio's async_wait re-arms its edge-triggered epoll registration with epoll_ctl(EPOLL_CTL_MOD)
// every time it is started, because it cannot know whether the socket is already readable; a
// relay waits once per message in each direction, so that is one system call in four. PgBouncer's
// persistent libevent registrations cost nothing to keep. This is the same thing inside asio: a
// reactor operation in the socket's read queue that answers "not ready" while it is being queued
// (so the reactor keeps it without touching epoll) and "ready" when the reactor calls it for an
// EPOLLIN/EPOLLHUP/EPOLLERR edge, which completes it on the loop thread like any handler.
//
// It uses Boost.Asio's reactor interface (detail::epoll_reactor::start_op), which is not public
// API: kAvailable is false on any other Boost or platform and the relay then waits with async_wait.
#pragma once

#include <boost/asio.hpp>
#include <boost/version.hpp>
#include <cstdint>
#include <memory>

#if defined(BOOST_ASIO_HAS_EPOLL) && !defined(BOOST_ASIO_HAS_IO_URING_AS_DEFAULT) && BOOST_VERSION >= 108100 && \
    BOOST_VERSION < 108200
#define PREDROP_REARMLESS_WAIT 1
#include <boost/asio/detail/epoll_reactor.hpp>
#include <boost/asio/detail/reactor_op.hpp>
#else
#define PREDROP_REARMLESS_WAIT 0
#endif

namespace predrop::proxy {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

// A tcp::socket that lets the relay reach its reactor registration.
class RelaySocket : public tcp::socket {
 public:
  explicit RelaySocket(tcp::socket&& s) : tcp::socket(std::move(s)) {}
#if PREDROP_REARMLESS_WAIT
  auto& reactor_impl() { return impl_.get_implementation(); }
#endif
};

#if PREDROP_REARMLESS_WAIT
class ReadinessWatch : private asio::detail::reactor_op {
 public:
  static constexpr bool kAvailable = true;
  using Callback = void (*)(void* arg, const boost::system::error_code& ec);

  ReadinessWatch() : reactor_op(boost::system::error_code(), &ReadinessWatch::perform_fn, &ReadinessWatch::complete_fn) {}
  ReadinessWatch(const ReadinessWatch&) = delete;
  ReadinessWatch& operator=(const ReadinessWatch&) = delete;

  bool armed() const { return armed_; }
  // The epoll events of the edge that completed it. EPOLLHUP/EPOLLERR mean a reset or a closed
  // connection may sit behind the bytes still to read, and no further edge will say so.
  uint32_t events() const { return events_; }

  // Completes once, on the socket's loop thread, at the next readiness edge (or with
  // operation_aborted when the socket closes). What `keep()` returns stays alive until a
  // completion that does not re-arm: asked for once, not at every re-arm.
  template <class Keep>
  void arm(RelaySocket& socket, Callback cb, void* arg, Keep&& keep) {
    if (armed_) return;
    if (!reactor_) reactor_ = &asio::use_service<asio::detail::epoll_reactor>(asio::query(socket.get_executor(), asio::execution::context));
    cb_ = cb;
    arg_ = arg;
    if (!keep_) keep_ = keep();
    ec_ = {};
    armed_ = true;
    arming_ = true;
    auto& impl = socket.reactor_impl();
    descriptor_ = impl.reactor_data_;
    reactor_->start_op(asio::detail::epoll_reactor::read_op, impl.socket_, impl.reactor_data_, this,
                       /*is_continuation=*/true, /*allow_speculative=*/true);
    arming_ = false;
  }

 private:
  static status perform_fn(reactor_op* base) {
    auto* self = static_cast<ReadinessWatch*>(base);
    if (self->arming_) return not_done;
    self->events_ = dispatched_events(self->descriptor_);
    return done;
  }
  // While it performs a descriptor's operations the reactor keeps the epoll events in the
  // descriptor's task_result_ (a protected member of its private base, scheduler_operation:
  // reached through a member pointer formed here and a C-style cast, which may name a private base).
  static uint32_t dispatched_events(asio::detail::epoll_reactor::per_descriptor_data d) {
    constexpr unsigned int asio::detail::scheduler_operation::*task_result = &ReadinessWatch::task_result_;
    return d ? ((asio::detail::scheduler_operation*)d)->*task_result : 0;
  }
  static void complete_fn(void* owner, asio::detail::scheduler_operation* base, const boost::system::error_code&, std::size_t) {
    auto* self = static_cast<ReadinessWatch*>(static_cast<reactor_op*>(base));
    self->armed_ = false;
    if (!owner) {   // the io_context is being destroyed
      std::shared_ptr<void> keep = std::move(self->keep_);
      return;
    }
    boost::system::error_code ec = self->ec_;
    self->cb_(self->arg_, ec);
    // Not re-armed: let go, last (it may own the object this watch lives in).
    if (!self->armed_) std::shared_ptr<void> keep = std::move(self->keep_);
  }

  asio::detail::epoll_reactor* reactor_ = nullptr;
  asio::detail::epoll_reactor::per_descriptor_data descriptor_ = nullptr;
  uint32_t events_ = 0;
  Callback cb_ = nullptr;
  void* arg_ = nullptr;
  std::shared_ptr<void> keep_;
  bool armed_ = false;
  bool arming_ = false;
};
#else
class ReadinessWatch {
 public:
  static constexpr bool kAvailable = false;
  using Callback = void (*)(void* arg, const boost::system::error_code& ec);
  bool armed() const { return false; }
  uint32_t events() const { return 0; }
  template <class Keep>
  void arm(RelaySocket&, Callback, void*, Keep&&) {}
};
#endif

}  // namespace predrop::proxy
