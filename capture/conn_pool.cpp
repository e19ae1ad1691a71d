#include "capture/conn_pool.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

namespace predrop::capture {

ConnPool::ConnPool(boost::asio::io_context& io, int max_total, ParamsFn params, std::string what,
                   std::chrono::seconds idle_close)
    : io_(io),
      max_total_(max_total < 1 ? 1 : max_total),
      params_(std::move(params)),
      what_(std::move(what)),
      idle_close_(idle_close) {}

void ConnPool::arm_idle_close() {
  if (idle_close_.count() <= 0 || idle_timer_armed_ || idle_.empty() || closed_) return;
  if (!idle_timer_) idle_timer_ = std::make_unique<boost::asio::steady_timer>(io_);
  idle_timer_armed_ = true;
  auto oldest = *std::min_element(idle_since_.begin(), idle_since_.end());
  idle_timer_->expires_at(oldest + idle_close_);
  idle_timer_->async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;  // cancelled: the pool is closing
    idle_timer_armed_ = false;
    close_idle();
  });
}

void ConnPool::close_idle() {
  if (closed_) return;
  const auto now = std::chrono::steady_clock::now();
  for (size_t i = 0; i < idle_.size();) {
    if (now - idle_since_[i] < idle_close_) {
      ++i;
      continue;
    }
    idle_[i]->kill();
    --open_;
    idle_.erase(idle_.begin() + static_cast<long>(i));
    idle_since_.erase(idle_since_.begin() + static_cast<long>(i));
  }
  arm_idle_close();
}

uint64_t ConnPool::acquire(const std::string& key, AcquireFn fn, bool background) {
  uint64_t t = next_ticket_++;
  // A foreground request queues ahead of every background one: FIFO within each class.
  auto at = waiters_.end();
  if (!background)
    at = std::find_if(waiters_.begin(), waiters_.end(), [](const Waiter& w) { return w.background; });
  waiters_.insert(at, {t, key, std::move(fn), background});
  // Served from the event loop, so a caller never re-enters itself.
  boost::asio::post(io_, [this] { pump(); });
  return t;
}

void ConnPool::cancel(uint64_t ticket) {
  if (auto a = connecting_.find(ticket); a != connecting_.end()) {
    a->second->waiter.fn = nullptr;   // the connection opens anyway and goes idle
    return;
  }
  for (auto it = waiters_.begin(); it != waiters_.end(); ++it)
    if (it->ticket == ticket) {
      waiters_.erase(it);
      return;
    }
}

void ConnPool::release(Conn conn, bool reusable) {
  if (!conn) return;
  if (reusable && !closed_ && !conn->busy()) {
    idle_.push_back(std::move(conn));
    idle_since_.push_back(std::chrono::steady_clock::now());
    arm_idle_close();
  } else {
    conn->kill();
    --open_;
  }
  pump();
}

void ConnPool::close_all() {
  closed_ = true;
  for (auto& c : idle_) c->kill();
  open_ -= idle_.size();
  idle_.clear();
  idle_since_.clear();
  if (idle_timer_) idle_timer_->cancel();
  waiters_.clear();
  for (auto& [ticket, attempt] : connecting_) {
    attempt->timer->cancel();
    attempt->conn->kill();   // its completion is never called now
    --open_;
  }
  connecting_.clear();
}

void ConnPool::pump() {
  if (closed_) return;
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    // An idle connection to the same database, the one released last first (PgBouncer reuses its
    // server connections so by default): a steady load then keeps busy only the connections it
    // needs, their backends' caches warm, and the rest go quiet until idle_close closes them. Taking
    // the oldest instead handed out every connection the pool had opened in turn, so none was ever
    // idle long enough to close (issue 21: the fleet's connections). Reused if the server has not
    // closed it.
    bool served = false;
    for (size_t c = idle_.size(); c-- > 0;) {
      if (idle_[c]->key() != it->key) continue;
      Conn conn = idle_[c];
      idle_.erase(idle_.begin() + static_cast<long>(c));
      idle_since_.erase(idle_since_.begin() + static_cast<long>(c));
      if (!conn->healthy()) {
        conn->kill();
        --open_;
        continue;
      }
      auto fn = std::move(it->fn);
      waiters_.erase(it);
      // The callback may acquire, cancel (a group's riders leave the queue) or release (which
      // pumps again): no iterator survives it, so the walk starts over.
      fn(std::move(conn), "");
      served = true;
      break;
    }
    if (served) {
      if (closed_) return;
      it = waiters_.begin();
      continue;
    }
    if (open_ >= static_cast<size_t>(max_total_) && !idle_.empty()) {
      // At the bound, but another database's connection sits idle: evict it.
      idle_.front()->kill();
      idle_.erase(idle_.begin());
      idle_since_.erase(idle_since_.begin());
      --open_;
    }
    if (open_ < static_cast<size_t>(max_total_)) {
      Waiter w = std::move(*it);
      it = waiters_.erase(it);
      open_for(std::move(w));
      continue;
    }
    ++it;  // keep its place in the queue
  }
}

void ConnPool::open_for(Waiter w) {
  ++open_;
  ++opened_;
  auto conn = std::make_shared<PgConn>(io_, w.key);
  // The waiter may be cancelled (its deadline passed) while the connection is opening; then
  // the fresh connection simply goes idle for the next request.
  uint64_t ticket = w.ticket;
  // Libpq's connect_timeout is not enforced in non-blocking mode, so bound the attempt here.
  auto attempt = std::make_shared<Attempt>(
      Attempt{conn, std::make_shared<boost::asio::steady_timer>(io_, connect_timeout_), std::move(w)});
  connecting_[ticket] = attempt;
  // Called by the connection or by the timer, whichever comes first; the attempt leaves
  // connecting_ then, so the other one finds it gone.
  auto complete = [this, conn, ticket, attempt](PgResult r) {
    auto it = connecting_.find(ticket);
    if (it == connecting_.end()) return;
    connecting_.erase(it);
    attempt->timer->cancel();
    Waiter& waiter = attempt->waiter;
    if (!r.ok()) {
      conn->kill();
      --open_;
      spdlog::warn("predrop {} connection to database '{}' failed: {}", what_, waiter.key, r.error);
      if (waiter.fn) waiter.fn(nullptr, r.error);
      pump();
      return;
    }
    if (waiter.fn) waiter.fn(conn, "");
    else release(conn, true);
  };
  attempt->timer->async_wait([complete](const boost::system::error_code& ec) {
    if (!ec) complete(PgResult{nullptr, "connection attempt timed out"});
  });
  conn->connect(params_(attempt->waiter.key), complete);
}

}  // namespace predrop::capture
