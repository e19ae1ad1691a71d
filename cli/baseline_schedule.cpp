#include "cli/baseline_schedule.hpp"

#include <libpq-fe.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio.hpp>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <mutex>

#include "evidence/baseline.hpp"

namespace predrop::cli {

namespace asio = boost::asio;
using Clock = std::chrono::system_clock;

struct BaselineSchedule::State {
  std::mutex m;
  std::condition_variable cv;
  bool stop = false;
  uint64_t generation = 0;  // bumped by every reload, so a waiting round recomputes its time
  std::shared_ptr<const policy::Config> config;
  std::string config_path;
  Overrides overrides;
  asio::io_context signal_ioc{1};
  // Registered at construction, before serve's own set: a SIGHUP from then on reloads.
  asio::signal_set sighup{signal_ioc, SIGHUP};

  std::shared_ptr<const policy::Config> current() {
    std::lock_guard lock(m);
    return config;
  }
  bool stopping() {
    std::lock_guard lock(m);
    return stop;
  }
  // Waits until `when`; true when that time came, false on a stop (or, if wake_on_reload, a reload).
  template <class TimePoint>
  bool wait_until(TimePoint when, bool wake_on_reload) {
    std::unique_lock lock(m);
    const uint64_t gen = generation;
    return !cv.wait_until(lock, when, [&] { return stop || (wake_on_reload && generation != gen); });
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

// The same file, overrides and restart-only rule as serve's own reload, so the schedule sees the
// configuration serve runs with.
void reload(BaselineSchedule::State& st) {
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

void wait_for_signal(asio::signal_set& set, BaselineSchedule::State& st) {
  set.async_wait([&set, &st](boost::system::error_code ec, int) {
    if (ec) return;
    reload(st);
    wait_for_signal(set, st);
  });
}

// serve sets up its logger first; until it has, a line would go to a logger being replaced.
std::shared_ptr<spdlog::logger> wait_for_logger(BaselineSchedule::State& st) {
  for (;;) {
    if (auto log = spdlog::get("predrop")) return log;
    if (!st.wait_until(std::chrono::steady_clock::now() + std::chrono::milliseconds(20), false)) return nullptr;
  }
}

// A round is named by its start, in seconds since the epoch (the pass's log line says which).
int64_t epoch_seconds(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

void run_pass(BaselineSchedule::State& st, spdlog::logger& log, const std::shared_ptr<const policy::Config>& cfg,
              const std::string& store, const std::string& db, int64_t round) {
  evidence::BaselineOptions o;
  o.target_conninfo = conninfo_with_dbname(cfg->capture_conninfo, db);
  o.store_conninfo = store;
  o.store_table = cfg->store_table;
  o.batch_size = cfg->baseline_batch_size;
  o.lanes = cfg->baseline_lanes;
  o.bounds = {cfg->profile_max_values, cfg->profile_max_value_chars, cfg->profile_max_columns};
  o.naive_array_split = cfg->naive_array_split;
  o.hash_excluded = cfg->hash_excluded;
  o.enrich_identity_sql = cfg->enrich_identity_sql;
  o.enrich_provenance_sql = cfg->enrich_provenance_sql;
  o.actor = "predrop serve baseline";
  // The tables a DROP TABLE would be snapshotted for (kind 0; a quarantine snapshots too), less baseline.exclude.
  o.include = [cfg](const std::string& d, const std::string& schema, const std::string& table) {
    return !cfg->baseline_excludes(schema, table) && cfg->decide(d, schema, table, policy::DestroyKind::drop_table).action != policy::Action::skip;
  };
  o.cancelled = [&st] { return st.stopping(); };
  try {
    auto r = evidence::run_baseline(o);
    log.info("baseline of {}: {} tables, {} candidates, {} captured, {} skipped, {:.2f} s, round {}{}", r.database,
             r.tables, r.candidates, r.captured, r.skipped, r.seconds, round,
             r.interrupted ? " (interrupted by shutdown)" : "");
    for (const auto& e : r.errors) log.warn("baseline of {}: batch failed: {}", r.database, e);
  } catch (const std::exception& e) {
    log.warn("baseline of {} failed: {}", db, e.what());
  }
}

// Claims the round that starts at round_start, under the baseline lock (migrations/0005): false
// when a serve claimed it, or a later one, already. A store not yet migrated that far, or a
// capture role without the grant, leaves only the lock to keep rounds apart, as before.
bool claim_round(evidence::PgSession& store, spdlog::logger& log, const std::string& store_table,
                 Clock::time_point round_start) {
  const int64_t epoch_s = epoch_seconds(round_start);
  try {
    auto r = store.exec(
        "INSERT INTO predrop.schedule_rounds AS r (schedule, store_table, round_start)"
        " VALUES ('baseline', $1, to_timestamp($2::bigint))"
        " ON CONFLICT (schedule, store_table) DO UPDATE SET round_start = EXCLUDED.round_start, claimed_at = now()"
        " WHERE r.round_start < EXCLUDED.round_start RETURNING 1",
        capture::Params{store_table, std::to_string(epoch_s)});
    return r.rows() > 0;
  } catch (const std::exception& e) {
    static std::once_flag warned;
    std::call_once(warned, [&] { log.warn("baseline: rounds are kept apart by the lock alone: {}", e.what()); });
    return true;
  }
}

void run_round(BaselineSchedule::State& st, spdlog::logger& log, Clock::time_point round_start) {
  auto cfg = st.current();
  const std::string store = cfg->store_conninfo.empty() ? cfg->capture_conninfo : cfg->store_conninfo;
  if (cfg->capture_conninfo.empty() || store.empty()) {
    log.warn("baseline.interval_s is set but there is no capture.conninfo (--capture): no baseline this round");
    return;
  }
  try {
    evidence::PgSession lock(store, "predrop-baseline-lock");
    const capture::Params key{std::to_string(kBaselineLockClass), cfg->store_table};
    if (lock.exec("SELECT pg_try_advisory_lock($1::int, hashtext($2))", key).text(0, 0) != "t") {
      log.debug("baseline: another predrop holds the baseline lock; skipping this round");
      return;
    }
    if (!claim_round(lock, log, cfg->store_table, round_start)) {
      log.debug("baseline: another predrop walked this round already; skipping it");
      lock.exec("SELECT pg_advisory_unlock($1::int, hashtext($2))", key);
      return;
    }
    for (const auto& db : cfg->baseline_databases) {
      if (st.stopping()) break;
      run_pass(st, log, cfg, store, db, epoch_seconds(round_start));
    }
    // Held to the middle of the round (at most a minute): a sidecar whose timer fires a little
    // late finds the lock still taken instead of walking the catalog a second time.
    auto hold = std::min<Clock::duration>(std::chrono::seconds(cfg->baseline_interval_s) / 2, std::chrono::seconds(60));
    st.wait_until(round_start + hold, false);
    lock.exec("SELECT pg_advisory_unlock($1::int, hashtext($2))", key);
  } catch (const std::exception& e) {
    log.warn("baseline round failed: {}", e.what());
  }
}

void run_rounds(BaselineSchedule::State& st) {
  auto log = wait_for_logger(st);
  if (!log) return;
  while (!st.stopping()) {
    const int interval = st.current()->baseline_interval_s;
    if (interval <= 0) {
      st.wait_until(std::chrono::steady_clock::now() + std::chrono::hours(1), true);
      continue;
    }
    const auto period = std::chrono::seconds(interval);
    const auto since_epoch = Clock::now().time_since_epoch();
    const auto next = Clock::time_point((since_epoch / period + 1) * period);
    if (!st.wait_until(next, true)) continue;
    run_round(st, *log, next);
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

BaselineSchedule::BaselineSchedule(std::shared_ptr<const policy::Config> config, std::string config_path,
                                   Overrides overrides)
    : state_(std::make_shared<State>()) {
  state_->config = std::move(config);
  state_->config_path = std::move(config_path);
  state_->overrides = std::move(overrides);
  // asio delivers a signal to every signal_set waiting for it: serve's own reload still happens.
  wait_for_signal(state_->sighup, *state_);
  signals_ = std::thread([st = state_] { st->signal_ioc.run(); });
  rounds_ = std::thread([st = state_] { run_rounds(*st); });
}

BaselineSchedule::~BaselineSchedule() { stop(); }

void BaselineSchedule::stop() {
  {
    std::lock_guard lock(state_->m);
    state_->stop = true;
  }
  state_->cv.notify_all();
  state_->signal_ioc.stop();
  if (signals_.joinable()) signals_.join();
  if (rounds_.joinable()) rounds_.join();
}

}  // namespace predrop::cli
