#include "cli/quarantine_purger.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio.hpp>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <map>
#include <mutex>
#include <set>

#include "capture/capture.hpp"
#include "cli/baseline_schedule.hpp"
#include "cli/quarantine.hpp"
#include "proxy/quarantine_metrics.hpp"

namespace predrop::cli {

namespace asio = boost::asio;
using capture::Params;
using evidence::PgSession;
using Clock = std::chrono::system_clock;

struct QuarantinePurger::State {
  std::mutex m;
  std::condition_variable cv;
  bool stop = false;
  uint64_t generation = 0;
  uint64_t kicks = 0, kicks_seen = 0;   // tables quarantined since the last round began (capture.hpp)
  std::shared_ptr<const policy::Config> config;
  std::string config_path;
  Overrides overrides;
  asio::io_context signal_ioc{1};
  asio::signal_set sighup{signal_ioc, SIGHUP};

  std::shared_ptr<const policy::Config> current() {
    std::lock_guard lock(m);
    return config;
  }
  bool stopping() {
    std::lock_guard lock(m);
    return stop;
  }
  template <class TimePoint>
  bool wait_until(TimePoint when, bool wake_on_reload) {
    std::unique_lock lock(m);
    const uint64_t gen = generation;
    return !cv.wait_until(lock, when, [&] {
      return stop || (wake_on_reload && (generation != gen || kicks != kicks_seen));
    });
  }
  // Whether a table was quarantined since the last call.
  bool take_kick() {
    std::lock_guard lock(m);
    bool kicked = kicks != kicks_seen;
    kicks_seen = kicks;
    return kicked;
  }
};

namespace {

// The same reload as serve's and the baseline's: the file, the flags, the restart-only keys kept.
void reload(QuarantinePurger::State& st) {
  if (st.config_path.empty()) return;
  auto result = policy::load_file(st.config_path);
  if (!result.errors.empty()) return;
  auto next = std::make_shared<policy::Config>(*result.config);
  if (st.overrides) st.overrides(*next);
  std::lock_guard lock(st.m);
  policy::keep_restart_keys(*next, *st.config);
  st.config = next;
  ++st.generation;
  st.cv.notify_all();
}

void wait_for_signal(asio::signal_set& set, QuarantinePurger::State& st) {
  set.async_wait([&set, &st](boost::system::error_code ec, int) {
    if (ec) return;
    reload(st);
    wait_for_signal(set, st);
  });
}

struct Held {
  HeldTable t;
  std::shared_ptr<PgSession> db;
};

void round_of(QuarantinePurger::State& st, spdlog::logger& log) {
  auto cfg = st.current();
  const QuarantineSettings qs = quarantine_settings(*cfg);
  const std::string store_conninfo = cfg->store_conninfo.empty() ? cfg->capture_conninfo : cfg->store_conninfo;
  if (cfg->capture_conninfo.empty()) return;
  PgSession lock(store_conninfo, "predrop-quarantine-purger");
  const Params key{std::to_string(kQuarantineLockClass), kQuarantineStoreTable};
  if (lock.exec("SELECT pg_try_advisory_lock($1::int, hashtext($2))", key).text(0, 0) != "t") {
    log.debug("quarantine: another predrop holds the purge lock; skipping this round");
    return;
  }
  bool store_ok = true;
  auto store_warn = [&](const std::exception& e) {
    if (store_ok) log.warn("quarantine: store rows not reconciled: {}", e.what());
    store_ok = false;
  };
  std::vector<Held> all;
  std::set<std::string> scanned;
  int64_t now = 0;
  {
    PgSession catalog(conninfo_or_dbname(cfg->capture_conninfo, "postgres"), "predrop-quarantine-purger");
    auto dbs = catalog.exec("SELECT datname FROM pg_database WHERE datallowconn AND NOT datistemplate ORDER BY datname");
    for (int i = 0; i < dbs.rows() && !st.stopping(); ++i) {
      const std::string name = dbs.text(i, 0);
      try {
        auto db = std::make_shared<PgSession>(conninfo_with_dbname(cfg->capture_conninfo, name), "predrop-quarantine-purger");
        // Only a quarantine this role owns (it ran the prepare SQL, or is a member of who did)
        // is this predrop's to count and purge: another fleet's is left to that fleet.
        auto own = db->exec("SELECT pg_has_role(nspowner, 'MEMBER') FROM pg_namespace WHERE nspname = $1", Params{qs.schema});
        if (own.rows() == 0 || own.text(0, 0) != "t") continue;
        auto held = list_held(*db, name, qs.schema);
        now = std::stoll(db->exec("SELECT extract(epoch FROM now())::bigint").text(0, 0));
        scanned.insert(name);
        try {
          if (store_ok) store_record_held(lock, qs.schema, held, qs.retention_s);
        } catch (const std::exception& e) {
          store_warn(e);
        }
        for (auto& h : held) all.push_back({std::move(h), db});
      } catch (const std::exception& e) {
        log.warn("quarantine: database {} not scanned: {}", name, e.what());
      }
    }
  }
  std::stable_sort(all.begin(), all.end(), [](const Held& a, const Held& b) { return a.t.dropped_at < b.t.dropped_at; });
  auto& metrics = proxy::quarantine_metrics();
  std::vector<bool> kept(all.size(), true);
  auto purge = [&](size_t i, const char* reason) {
    const auto& h = all[i].t;
    const std::string what = h.database + " " + h.detail.value("schema", "") + "." + h.detail.value("table", "") +
                             " (id " + h.id() + ", " + qs.schema + "." + h.quarantine_table + ")";
    try {
      auto outcome = purge_held(*all[i].db, qs.schema, h, qs.lock_timeout_ms);
      if (outcome == PurgeOutcome::lock_timeout) {
        log.info("quarantine: purge ({}) of {} skipped: another session holds a lock on it (lock_timeout {} ms); "
                 "retried next round", reason, what, qs.lock_timeout_ms);
        return false;
      }
      kept[i] = false;
      if (outcome == PurgeOutcome::dropped) {
        log.info("quarantine: purged ({}) {}", reason, what);
        (std::string(reason) == "expired" ? metrics.purged_expired : metrics.purged_cap).fetch_add(1);
      }
      try {
        if (store_ok) store_mark(lock, h, qs.schema, "purged", reason);
      } catch (const std::exception& e) {
        store_warn(e);
      }
      return true;
    } catch (const std::exception& e) {
      log.warn("quarantine: purge ({}) of {} failed: {}", reason, what, e.what());
      return false;
    }
  };
  for (size_t i = 0; i < all.size() && !st.stopping(); ++i)
    if (all[i].t.dropped_at + qs.retention_s <= now) purge(i, "expired");
  // The caps are per database (a quarantine schema is): within each, oldest first; one that is
  // locked is passed over for the next oldest.
  auto over_cap = [&](const std::string& database) {
    uint64_t n = 0, bytes = 0;
    for (size_t i = 0; i < all.size(); ++i)
      if (kept[i] && all[i].t.database == database) ++n, bytes += static_cast<uint64_t>(all[i].t.bytes);
    return (qs.max_tables > 0 && n > qs.max_tables) || (qs.max_bytes > 0 && bytes > qs.max_bytes);
  };
  for (size_t i = 0; i < all.size() && !st.stopping(); ++i)
    if (kept[i] && over_cap(all[i].t.database)) purge(i, "cap");
  int64_t tables = 0, bytes = 0;
  std::map<std::string, int64_t> per_database;
  for (size_t i = 0; i < all.size(); ++i)
    if (kept[i]) ++tables, bytes += all[i].t.bytes, per_database[all[i].t.database] += all[i].t.bytes;
  int64_t largest = 0;
  for (const auto& [name, b] : per_database) largest = std::max(largest, b);
  metrics.tables = tables;
  metrics.bytes = bytes;
  metrics.largest_database_bytes = largest;
  metrics.max_bytes = qs.max_bytes;
  metrics.scanned = true;
  // Rows still 'held' for tables no database lists any more: gone by other hands (a DROP by the
  // schema's owner, a restore of an old predrop): say so rather than count them as held.
  if (store_ok) {
    try {
      std::vector<std::string> ids, dbnames;
      for (size_t i = 0; i < all.size(); ++i)
        if (kept[i]) ids.push_back(all[i].t.id());
      for (const auto& d : scanned) dbnames.push_back(d);
      auto arr = [](const std::vector<std::string>& v) {
        nlohmann::json j = v;
        return j.dump();
      };
      lock.exec(std::string("UPDATE ") + kQuarantineStoreTable +
                    " SET state = 'purged', state_at = now(), state_reason = 'missing' WHERE state = 'held'"
                    " AND quarantine_schema = $1 AND database_name IN (SELECT jsonb_array_elements_text($2::jsonb))"
                    " AND id::text NOT IN (SELECT jsonb_array_elements_text($3::jsonb)) AND dropped_at < now() - interval '1 minute'",
                Params{qs.schema, arr(dbnames), arr(ids)});
      metrics.undrops = std::stoll(
          lock.exec(std::string("SELECT count(*) FROM ") + kQuarantineStoreTable + " WHERE state = 'restored'").text(0, 0));
    } catch (const std::exception& e) {
      store_warn(e);
    }
  }
  lock.exec("SELECT pg_advisory_unlock($1::int, hashtext($2))", key);
}

void run_rounds(QuarantinePurger::State& st) {
  std::shared_ptr<spdlog::logger> log;
  while (!(log = spdlog::get("predrop")))
    if (!st.wait_until(std::chrono::steady_clock::now() + std::chrono::milliseconds(20), false)) return;
  // Under churn every DROP quarantines a table and kicks a round; a round (its connections, its
  // listing, the store's reconciliation) costs more than the DROP, so kicked rounds start at most
  // one a second and each purges everything over the caps (issue 21: predrop's CPU per quarantined
  // DROP fell from 3.7 ms).
  constexpr auto kKickedRoundSpacing = std::chrono::seconds(1);
  auto last_round = std::chrono::steady_clock::time_point{};
  while (!st.stopping()) {
    const int interval = quarantine_settings(*st.current()).purge_interval_s;
    if (interval <= 0) {
      st.wait_until(std::chrono::steady_clock::now() + std::chrono::hours(1), true);
      continue;
    }
    const auto period = std::chrono::seconds(interval);
    const auto next = Clock::time_point((Clock::now().time_since_epoch() / period + 1) * period);
    if (!st.wait_until(next, true)) {
      // A new table in quarantine: a cap it passes is enforced now, oldest first, not next round.
      auto cfg = st.current();
      if (!st.take_kick() || st.stopping() || (cfg->quarantine_max_tables <= 0 && cfg->quarantine_max_bytes == 0))
        continue;
      const auto earliest = last_round + kKickedRoundSpacing;
      if (std::chrono::steady_clock::now() < earliest && !st.wait_until(earliest, false)) continue;
      st.take_kick();
    } else {
      st.take_kick();
    }
    last_round = std::chrono::steady_clock::now();
    try {
      round_of(st, *log);
    } catch (const std::exception& e) {
      log->warn("quarantine: purge round failed: {}", e.what());
    }
  }
}

}  // namespace

QuarantinePurger::QuarantinePurger(std::shared_ptr<const policy::Config> config, std::string config_path,
                                   Overrides overrides)
    : state_(std::make_shared<State>()) {
  state_->config = std::move(config);
  state_->config_path = std::move(config_path);
  state_->overrides = std::move(overrides);
  wait_for_signal(state_->sighup, *state_);
  signals_ = std::thread([st = state_] { st->signal_ioc.run(); });
  rounds_ = std::thread([st = state_] { run_rounds(*st); });
  capture::set_quarantine_listener([weak = std::weak_ptr<State>(state_)] {
    auto st = weak.lock();
    if (!st) return;
    {
      std::lock_guard lock(st->m);
      ++st->kicks;
    }
    st->cv.notify_all();
  });
}

QuarantinePurger::~QuarantinePurger() { stop(); }

void QuarantinePurger::stop() {
  capture::set_quarantine_listener({});
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
