// What every session shares: the policy in force, the parse cache, the capture service,
// TLS contexts and the registry that routes CancelRequests and drains at shutdown.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include <boost/asio/ssl.hpp>

#include "capture/capture.hpp"
#include "parser/parser.hpp"
#include "proxy/console.hpp"
#include "proxy/hold.hpp"
#include "policy/policy.hpp"

namespace predrop::proxy {

class Session;

// Sessions by backend key (for CancelRequest) and all live sessions (for the drain). Console
// sessions are live too (the drain's end closes them) but are not counted: size() is the clients.
class SessionRegistry {
 public:
  void add(const std::shared_ptr<Session>& s);
  void remove(Session* s);
  void set_key(const std::shared_ptr<Session>& s, std::string key);
  std::shared_ptr<Session> find_by_key(const std::string& key);
  std::vector<std::shared_ptr<Session>> all();
  size_t size();
  void set_console(Session* s);

 private:
  std::mutex mu_;
  std::map<Session*, std::weak_ptr<Session>> live_;
  std::map<std::string, std::weak_ptr<Session>> by_key_;
  std::map<Session*, std::string> key_of_;
  std::set<Session*> consoles_;
};

// What waits for a prepared transaction (PREPARE TRANSACTION) to end, by database and gid, until
// some session sends COMMIT PREPARED or ROLLBACK PREPARED (`take` hands it over either way). Bounded:
// past kMax transactions the oldest is forgotten and logged, as `what` names it.
template <class Item>
class ByPreparedTransaction {
 public:
  static constexpr size_t kMax = 10000;
  explicit ByPreparedTransaction(const char* what) : what_(what) {}
  void put(const std::string& database, const std::string& gid, std::vector<Item> items) {
    std::lock_guard lock(mu_);
    auto key = std::make_pair(database, gid);
    if (!by_gid_.count(key)) order_.push_back(key);
    auto& slot = by_gid_[key];
    for (auto& i : items) slot.push_back(std::move(i));
    while (by_gid_.size() > kMax && !order_.empty()) {
      auto oldest = order_.front();
      order_.erase(order_.begin());
      if (by_gid_.erase(oldest)) forgotten(oldest.first, oldest.second);
    }
  }
  std::vector<Item> take(const std::string& database, const std::string& gid) {
    std::lock_guard lock(mu_);
    auto key = std::make_pair(database, gid);
    auto it = by_gid_.find(key);
    if (it == by_gid_.end()) return {};
    auto items = std::move(it->second);
    by_gid_.erase(it);
    std::erase(order_, key);
    return items;
  }

 private:
  void forgotten(const std::string& database, const std::string& gid) const;
  const char* what_;
  std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::vector<Item>> by_gid_;
  std::vector<std::pair<std::string, std::string>> order_;
};
// The console's commands of cli/ run on threads of their own (they block on the store) and post
// their answers onto a session's loop. serve waits for them, bounded, before its loops go away;
// one that finishes after that posts nothing (finish returns without calling post).
class OutsideWork {
 public:
  void begin() {
    std::lock_guard lock(mu_);
    ++running_;
  }
  void finish(const std::function<void()>& post) {
    {
      std::lock_guard lock(mu_);
      if (!closed_) post();
      --running_;
    }
    cv_.notify_all();
  }
  // Waits up to `limit` for the running ones, then lets none post again; returns how many still run.
  size_t close(std::chrono::milliseconds limit) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, limit, [this] { return running_ == 0; });
    closed_ = true;
    return running_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  size_t running_ = 0;
  bool closed_ = false;
};

// Afters of a prepared transaction's shape changes: captured at COMMIT PREPARED.
using PreparedAfters = ByPreparedTransaction<capture::SnapshotRequest>;
// Outcome checks of its DROPs (a quarantine's included): what happened is known only at its end.
using PreparedOutcomes = ByPreparedTransaction<capture::PendingOutcome>;

struct ProxyContext {
  std::shared_ptr<const policy::Config> config() const { return std::atomic_load(&config_); }
  void set_config(std::shared_ptr<const policy::Config> c) { std::atomic_store(&config_, std::move(c)); }

  std::shared_ptr<const policy::Config> config_;
  parser::Classifier classifier{8192};
  std::unique_ptr<capture::CaptureService> capture;
  std::unique_ptr<HoldCapture> hold_capture;   // the capture as holds use it; null without one
  std::unique_ptr<boost::asio::ssl::context> client_tls;    // null: SSLRequest answered 'N'
  std::unique_ptr<boost::asio::ssl::context> upstream_tls;  // null: sslmode=disable
  SessionRegistry registry;
  PreparedAfters prepared_afters{"afters"};
  PreparedOutcomes prepared_outcomes{"outcome checks"};
  std::atomic<bool> draining{false};
  // The console's commands served outside proxy/ (cli/ gives them to serve), and RELOAD: the
  // server's SIGHUP reload, run on its main thread; done gets what the log says, or errors.
  ConsoleCommands console_commands;
  // Shared: a command thread still running at exit holds it after the server is gone.
  std::shared_ptr<OutsideWork> console_work = std::make_shared<OutsideWork>();
  struct ReloadOutcome {
    bool ok = false;
    std::vector<std::string> lines;   // errors when !ok; restart-only keys the file changed when ok
  };
  std::function<void(std::function<void(ReloadOutcome)> done)> reload;
};

}  // namespace predrop::proxy
