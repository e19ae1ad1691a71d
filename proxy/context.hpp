// What every session shares: the policy in force, the parse cache, the capture service,
// TLS contexts and the registry that routes CancelRequests and drains at shutdown.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include <boost/asio/ssl.hpp>

#include "capture/capture.hpp"
#include "parser/parser.hpp"
#include "policy/policy.hpp"

namespace predrop::proxy {

class Session;

// Sessions by backend key (for CancelRequest) and all live sessions (for the drain).
class SessionRegistry {
 public:
  void add(const std::shared_ptr<Session>& s);
  void remove(Session* s);
  void set_key(const std::shared_ptr<Session>& s, std::string key);
  std::shared_ptr<Session> find_by_key(const std::string& key);
  std::vector<std::shared_ptr<Session>> all();
  size_t size();

 private:
  std::mutex mu_;
  std::map<Session*, std::weak_ptr<Session>> live_;
  std::map<std::string, std::weak_ptr<Session>> by_key_;
  std::map<Session*, std::string> key_of_;
};

// Afters of prepared transactions (PREPARE TRANSACTION), by database and gid, until some session
// sends COMMIT PREPARED (they are captured) or ROLLBACK PREPARED (forgotten). Bounded: past
// kMax the oldest is forgotten (its changes get no after; the log says so).
class PreparedAfters {
 public:
  static constexpr size_t kMax = 10000;
  void put(const std::string& database, const std::string& gid, std::vector<capture::SnapshotRequest> requests);
  std::vector<capture::SnapshotRequest> take(const std::string& database, const std::string& gid);

 private:
  std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::vector<capture::SnapshotRequest>> by_gid_;
  std::vector<std::pair<std::string, std::string>> order_;
};

// Outcome checks of prepared transactions: a DROP's (or a quarantine's) result is known only at
// COMMIT PREPARED or ROLLBACK PREPARED, which any session may send. Bounded as PreparedAfters.
class PreparedOutcomes {
 public:
  static constexpr size_t kMax = 10000;
  void put(const std::string& database, const std::string& gid, std::vector<capture::PendingOutcome> pending) {
    std::lock_guard lock(mu_);
    auto key = std::make_pair(database, gid);
    if (!by_gid_.count(key)) order_.push_back(key);
    auto& slot = by_gid_[key];
    for (auto& p : pending) slot.push_back(std::move(p));
    while (by_gid_.size() > kMax && !order_.empty()) {
      by_gid_.erase(order_.front());
      order_.erase(order_.begin());
    }
  }
  std::vector<capture::PendingOutcome> take(const std::string& database, const std::string& gid) {
    std::lock_guard lock(mu_);
    auto it = by_gid_.find(std::make_pair(database, gid));
    if (it == by_gid_.end()) return {};
    auto out = std::move(it->second);
    by_gid_.erase(it);
    std::erase(order_, std::make_pair(database, gid));
    return out;
  }

 private:
  std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::vector<capture::PendingOutcome>> by_gid_;
  std::vector<std::pair<std::string, std::string>> order_;
};

struct ProxyContext {
  std::shared_ptr<const policy::Config> config() const { return std::atomic_load(&config_); }
  void set_config(std::shared_ptr<const policy::Config> c) { std::atomic_store(&config_, std::move(c)); }

  std::shared_ptr<const policy::Config> config_;
  parser::Classifier classifier{8192};
  std::unique_ptr<capture::CaptureService> capture;
  std::unique_ptr<boost::asio::ssl::context> client_tls;    // null: SSLRequest answered 'N'
  std::unique_ptr<boost::asio::ssl::context> upstream_tls;  // null: sslmode=disable
  SessionRegistry registry;
  PreparedAfters prepared_afters;
  PreparedOutcomes prepared_outcomes;
  std::atomic<bool> draining{false};
};

}  // namespace predrop::proxy
