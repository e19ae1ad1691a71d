// A task of serve that one sidecar of a fleet runs per round (the baseline, the quarantine's
// purge). Rounds fall on multiples of an interval since the epoch, so the sidecars of a fleet try
// at the same moment; which of them walks a round is settled on the store, by the task (a
// session-level advisory lock, and for the baseline a claimed round: see RoundLock). The task's
// configuration follows SIGHUP as serve's own does (the same file, flags and restart-only keys).
// Rounds run on a thread of their own with their own connections: the relay never waits for them.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include <spdlog/spdlog.h>

#include "capture/pg_async.hpp"
#include "evidence/store_reader.hpp"
#include "policy/policy.hpp"

namespace predrop::evidence {

// libpq conninfo (key=value or URI) with dbname set to `dbname`, as key=value text.
std::string conninfo_with_dbname(const std::string& conninfo, const std::string& dbname);
// The conninfo as it is when it names a database, else with `dbname`: the capture conninfo usually
// names none (libpq would then try a database named after the role).
std::string conninfo_or_dbname(const std::string& conninfo, const std::string& dbname);
// The store's conninfo: store.conninfo, else the capture's.
std::string store_conninfo_of(const policy::Config& cfg);

class FleetSchedule {
 public:
  using Clock = std::chrono::system_clock;
  using Overrides = std::function<void(policy::Config&)>;

  struct Round {
    Clock::time_point start;   // the multiple of the interval it is named by; now, for a kicked round
    int64_t epoch_s = 0;       // start in seconds since the epoch (the log names rounds by it)
    bool kicked = false;       // started early by kick()
    // What the kicks since the last round named (kick's subject): a kicked round may do only
    // their part, since the scheduled rounds do the whole.
    std::set<std::string> kicked_for;
  };

  struct Task {
    std::string name;   // in the log's words: "baseline", "quarantine purge"
    // The interval in seconds under a configuration; <= 0: no rounds (until a reload sets one).
    std::function<int(const policy::Config&)> interval_s;
    // One round. Exceptions are logged as "NAME round failed: …".
    std::function<void(FleetSchedule&, spdlog::logger&, const std::shared_ptr<const policy::Config>&, const Round&)> run;
    // Whether a kick() starts a round before the next multiple under a configuration (null: kicks
    // are ignored). Kicked rounds start at most one per kicked_round_spacing.
    std::function<bool(const policy::Config&)> kick_starts_round;
    std::chrono::milliseconds kicked_round_spacing{1000};
    // What a task keeps between rounds (connections) is let go by on_idle, called on the rounds'
    // thread once no round has started for idle_after(config) since the last one ended (<= 0:
    // never). Null: nothing is kept.
    std::function<std::chrono::seconds(const policy::Config&)> idle_after;
    std::function<void()> on_idle;
  };

  // Starts the schedule's threads.
  FleetSchedule(std::shared_ptr<const policy::Config> config, std::string config_path, Overrides overrides, Task task);
  ~FleetSchedule();
  FleetSchedule(const FleetSchedule&) = delete;
  FleetSchedule& operator=(const FleetSchedule&) = delete;

  // Something happened that a round should see soon (a table quarantined in `subject`, a
  // database): thread-safe.
  void kick(const std::string& subject = {});
  // Ends a running round at its next check of stopping(), and joins.
  void stop();

  // For the task's round: the configuration in force, whether serve is stopping, and a wait that a
  // stop ends early (false then).
  std::shared_ptr<const policy::Config> current() const;
  bool stopping() const;
  bool wait_until(Clock::time_point when) const;

  struct State;

 private:
  std::shared_ptr<State> state_;
  std::thread rounds_, signals_;
};

// The store's side of a round: a session-level advisory lock (lock_class, hashtext(key)) on its
// own connection to the store, so that one sidecar at a time walks; released by release() or when
// the connection closes.
class RoundLock {
 public:
  RoundLock(const std::string& store_conninfo, std::string application_name, int lock_class, std::string key);
  ~RoundLock();
  RoundLock(const RoundLock&) = delete;
  RoundLock& operator=(const RoundLock&) = delete;

  // false: another sidecar holds it.
  bool try_lock();
  // Records under the lock that `schedule`'s round starting at `round` was walked (migrations/0005,
  // predrop.schedule_rounds): false when this round, or a later one, was claimed already, so a
  // sidecar whose timer fired after the walker let go does not walk it again. A store not migrated
  // that far, or a role without the grant, leaves the lock alone to keep rounds apart (one warning).
  bool claim_round(const std::string& schedule, const std::string& store_table, int64_t round_epoch_s, spdlog::logger& log);
  void release();
  evidence::PgSession& session() { return db_; }

 private:
  evidence::PgSession db_;
  capture::Params key_;
  bool held_ = false;
};

}  // namespace predrop::evidence
