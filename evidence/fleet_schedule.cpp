#include "evidence/fleet_schedule.hpp"

#include <libpq-fe.h>

#include <boost/asio.hpp>
#include <csignal>
#include <stdexcept>
#include <string_view>

namespace predrop::evidence {

namespace asio = boost::asio;
using Clock = FleetSchedule::Clock;

struct FleetSchedule::State {
  mutable std::mutex m;
  mutable std::condition_variable cv;
  bool stop = false;
  uint64_t generation = 0;              // bumped by every reload, so a waiting round recomputes its time
  uint64_t kicks = 0, kicks_seen = 0;   // kick() calls since the last round began
  std::set<std::string> kicked_for;     // their subjects
  std::shared_ptr<const policy::Config> config;
  std::string config_path;
  Overrides overrides;
  Task task;
  asio::io_context signal_ioc{1};
  // Registered at construction, before serve's own set: a SIGHUP from then on reloads. asio
  // delivers a signal to every signal_set waiting for it, so serve's own reload still happens.
  asio::signal_set sighup{signal_ioc, SIGHUP};

  std::shared_ptr<const policy::Config> current() const {
    std::lock_guard lock(m);
    return config;
  }
  bool stopping() const {
    std::lock_guard lock(m);
    return stop;
  }
  // Waits until `when`; true when that time came, false on a stop (or, if woken_by_news, a reload
  // or a kick).
  template <class TimePoint>
  bool wait_until(TimePoint when, bool woken_by_news) const {
    std::unique_lock lock(m);
    const uint64_t gen = generation;
    return !cv.wait_until(lock, when, [&] { return stop || (woken_by_news && (generation != gen || kicks != kicks_seen)); });
  }
  // Whether kick() was called since the last call; their subjects are added to `subjects`.
  bool take_kick(std::set<std::string>& subjects) {
    std::lock_guard lock(m);
    bool kicked = kicks != kicks_seen;
    kicks_seen = kicks;
    subjects.merge(kicked_for);
    kicked_for.clear();
    return kicked;
  }
};

namespace {

std::string quote_value(const std::string& v) {
  std::string out = "'";
  for (char c : v) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

// The same file, overrides and restart-only rule as serve's own reload, so a round sees the
// configuration serve runs with.
void reload(FleetSchedule::State& st) {
  if (st.config_path.empty()) return;
  auto result = policy::load_file(st.config_path);
  if (!result.errors.empty()) return;  // serve logs the errors and keeps its policy; so do we
  auto next = std::make_shared<policy::Config>(*result.config);
  if (st.overrides) st.overrides(*next);
  std::lock_guard lock(st.m);
  policy::keep_restart_keys(*next, *st.config);
  st.config = next;
  ++st.generation;
  st.cv.notify_all();
}

void wait_for_signal(asio::signal_set& set, FleetSchedule::State& st) {
  set.async_wait([&set, &st](boost::system::error_code ec, int) {
    if (ec) return;
    reload(st);
    wait_for_signal(set, st);
  });
}

int64_t epoch_seconds(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

void run_rounds(FleetSchedule& fs, FleetSchedule::State& st) {
  // serve sets up its logger first; until it has, a line would go to a logger being replaced.
  std::shared_ptr<spdlog::logger> log;
  while (!(log = spdlog::get("predrop")))
    if (!st.wait_until(std::chrono::steady_clock::now() + std::chrono::milliseconds(20), false)) return;
  using Steady = std::chrono::steady_clock;
  auto last_round = Steady::time_point{};
  bool idle_due = false;   // a round ended and on_idle has not been called since
  auto last_round_end = Steady::time_point{};
  while (!st.stopping()) {
    const auto config = st.current();
    const int interval = st.task.interval_s(*config);
    const auto idle_after =
        st.task.on_idle && st.task.idle_after ? st.task.idle_after(*config) : std::chrono::seconds(0);
    if (idle_due && idle_after.count() <= 0) idle_due = false;
    FleetSchedule::Round round;
    bool came = false, idle_first = false;
    if (interval <= 0) {
      idle_first = idle_due;
      came = st.wait_until(idle_due ? last_round_end + idle_after : Steady::now() + std::chrono::hours(1), true);
      if (!(came && idle_first)) {
        st.take_kick(round.kicked_for);   // no rounds: a kick has nothing to start
        continue;
      }
    } else {
      const auto period = std::chrono::seconds(interval);
      round.start = Clock::time_point((Clock::now().time_since_epoch() / period + 1) * period);
      idle_first = idle_due && last_round_end + idle_after - Steady::now() < round.start - Clock::now();
      came = idle_first ? st.wait_until(last_round_end + idle_after, true) : st.wait_until(round.start, true);
    }
    if (came && idle_first) {
      idle_due = false;
      try {
        st.task.on_idle();
      } catch (const std::exception& e) {
        log->warn("{}: closing what its rounds kept failed: {}", st.task.name, e.what());
      }
      continue;
    }
    if (!came) {
      // Woken early: a stop, a reload (the next multiple is computed again) or a kick.
      const bool kicked = st.take_kick(round.kicked_for);
      if (!kicked || st.stopping() || !st.task.kick_starts_round || !st.task.kick_starts_round(*st.current())) continue;
      const auto earliest = last_round + st.task.kicked_round_spacing;
      if (Steady::now() < earliest && !st.wait_until(earliest, false)) continue;
      st.take_kick(round.kicked_for);
      round.kicked = true;
      round.start = Clock::now();
    } else {
      st.take_kick(round.kicked_for);   // this round sees what a kick announced
    }
    round.epoch_s = epoch_seconds(round.start);
    last_round = Steady::now();
    try {
      st.task.run(fs, *log, st.current(), round);
    } catch (const std::exception& e) {
      log->warn("{} round failed: {}", st.task.name, e.what());
    }
    last_round_end = Steady::now();
    idle_due = true;
  }
}

}  // namespace

std::string conninfo_with_dbname(const std::string& conninfo, const std::string& dbname) {
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(conninfo.c_str(), &err);
  if (!opts) {
    std::string msg = err ? err : "out of memory";
    PQfreemem(err);
    throw std::runtime_error("capture.conninfo: " + msg);
  }
  std::string out;
  for (auto* o = opts; o->keyword; ++o) {
    if (!o->val || std::string_view(o->keyword) == "dbname") continue;
    out += std::string(o->keyword) + "=" + quote_value(o->val) + " ";
  }
  PQconninfoFree(opts);
  return out + "dbname=" + quote_value(dbname);
}

std::string conninfo_or_dbname(const std::string& conninfo, const std::string& dbname) {
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(conninfo.c_str(), &err);
  if (!opts) {
    PQfreemem(err);
    return conninfo;   // the connection attempt reports what is wrong with it
  }
  bool named = false;
  for (auto* o = opts; o->keyword; ++o)
    if (std::string_view(o->keyword) == "dbname" && o->val && *o->val) named = true;
  PQconninfoFree(opts);
  return named ? conninfo : conninfo_with_dbname(conninfo, dbname);
}

std::string store_conninfo_of(const policy::Config& cfg) {
  return cfg.store_conninfo.empty() ? cfg.capture_conninfo : cfg.store_conninfo;
}

FleetSchedule::FleetSchedule(std::shared_ptr<const policy::Config> config, std::string config_path, Overrides overrides,
                             Task task)
    : state_(std::make_shared<State>()) {
  state_->config = std::move(config);
  state_->config_path = std::move(config_path);
  state_->overrides = std::move(overrides);
  state_->task = std::move(task);
  wait_for_signal(state_->sighup, *state_);
  signals_ = std::thread([st = state_] { st->signal_ioc.run(); });
  rounds_ = std::thread([this, st = state_] { run_rounds(*this, *st); });
}

FleetSchedule::~FleetSchedule() { stop(); }

void FleetSchedule::kick(const std::string& subject) {
  {
    std::lock_guard lock(state_->m);
    ++state_->kicks;
    if (!subject.empty()) state_->kicked_for.insert(subject);
  }
  state_->cv.notify_all();
}

void FleetSchedule::stop() {
  {
    std::lock_guard lock(state_->m);
    state_->stop = true;
  }
  state_->cv.notify_all();
  state_->signal_ioc.stop();
  if (signals_.joinable()) signals_.join();
  if (rounds_.joinable()) rounds_.join();
}

std::shared_ptr<const policy::Config> FleetSchedule::current() const { return state_->current(); }
bool FleetSchedule::stopping() const { return state_->stopping(); }
bool FleetSchedule::wait_until(Clock::time_point when) const { return state_->wait_until(when, false); }

RoundLock::RoundLock(const std::string& store_conninfo, std::string application_name, int lock_class, std::string key)
    : db_(store_conninfo, application_name), key_{std::to_string(lock_class), std::move(key)} {}

RoundLock::~RoundLock() { release(); }

bool RoundLock::try_lock() {
  held_ = db_.exec("SELECT pg_try_advisory_lock($1::int, hashtext($2))", key_).text(0, 0) == "t";
  return held_;
}

bool RoundLock::claim_round(const std::string& schedule, const std::string& store_table, int64_t round_epoch_s,
                            spdlog::logger& log) {
  try {
    auto r = db_.exec(
        "INSERT INTO predrop.schedule_rounds AS r (schedule, store_table, round_start)"
        " VALUES ($1, $2, to_timestamp($3::bigint))"
        " ON CONFLICT (schedule, store_table) DO UPDATE SET round_start = EXCLUDED.round_start, claimed_at = now()"
        " WHERE r.round_start < EXCLUDED.round_start RETURNING 1",
        capture::Params{schedule, store_table, std::to_string(round_epoch_s)});
    return r.rows() > 0;
  } catch (const std::exception& e) {
    static std::once_flag warned;
    std::call_once(warned, [&] { log.warn("{}: rounds are kept apart by the lock alone: {}", schedule, e.what()); });
    return true;
  }
}

void RoundLock::release() {
  if (!held_) return;
  held_ = false;
  try {
    db_.exec("SELECT pg_advisory_unlock($1::int, hashtext($2))", key_);
  } catch (const std::exception&) {
    // The connection is gone, and the lock with it.
  }
}

}  // namespace predrop::evidence
