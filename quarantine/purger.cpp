#include "quarantine/purger.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <set>

#include "quarantine/held.hpp"
#include "quarantine/metrics.hpp"

namespace predrop::quarantine {

using evidence::FleetSchedule;
using evidence::RoundLock;

using capture::Params;
using evidence::PgSession;

namespace {

// How often a scheduled round walks every database the capture role may connect to.
constexpr std::chrono::hours kWalkAllEvery{1};

struct Held {
  HeldTable t;
  std::shared_ptr<PgSession> db;
};

// What the purger keeps from one round to the next (issue 21). Under a churn at a cap every DROP
// kicks a round (one a second): each opened a session to the store and to every database, whose
// first statements cost the server about 7 ms each on cold caches, and measured every held table
// again (36 of the listing's 54 ms at 222 held). So the sessions a kick asked for stay open until
// capture.idle_close_s pass without a round, a kicked round walks only the databases its kicks
// named, and it measures only the tables it has not measured; the scheduled rounds walk and
// measure everything (a vacuum may add a held table's free-space and visibility maps).
struct Kept {
  struct Database {
    std::shared_ptr<PgSession> session;
    std::map<std::string, int64_t> bytes;   // by quarantine table: its size when last measured
    std::set<std::string> recorded;          // ids whose store row a round wrote (or found written)
    int64_t tables = 0, held_bytes = 0;      // what the last round left held, for the metrics
  };
  std::string capture, store;   // the conninfos the sessions were opened with
  std::unique_ptr<RoundLock> round_lock;
  std::map<std::string, Database> databases;
  std::optional<std::chrono::steady_clock::time_point> walked_all_at;   // the last walk of every database

  void close_sessions() {
    round_lock.reset();
    for (auto& [name, d] : databases) d.session.reset();
  }
};

// The sizes the store's rows already give (the outcome check measures each table it finds moved as
// it records it: capture/capture_service.cpp), added to those this process measured. A quarantined
// table does not change, so a kicked round measures only the tables nobody measured: each kicked
// round measured every table new since the last again, about 0.1 ms a table on a session that had
// not opened it yet (issue 21: 28 ms a round at 150 new tables at one client, 120 at eight).
void add_recorded_bytes(PgSession& store, const std::string& database, const std::string& schema,
                        std::map<std::string, int64_t>& known) {
  auto r = store.exec(std::string("SELECT quarantine_table, bytes FROM ") + kQuarantineStoreTable +
                          " WHERE database_name = $1 AND quarantine_schema = $2 AND state = 'held' AND bytes IS NOT NULL",
                      Params{database, schema});
  for (int i = 0; i < r.rows(); ++i) known.emplace(r.text(i, 0), std::stoll(r.text(i, 1)));
}

void round_of(Kept& kept, FleetSchedule& fs, spdlog::logger& log, const std::shared_ptr<const policy::Config>& cfg,
              const FleetSchedule::Round& round) {
  const Settings qs = settings_of(*cfg);
  if (cfg->capture_conninfo.empty()) return;
  const std::string store_conninfo = evidence::store_conninfo_of(*cfg);
  if (kept.capture != cfg->capture_conninfo || kept.store != store_conninfo) {
    kept = {};
    kept.capture = cfg->capture_conninfo;
    kept.store = store_conninfo;
  }
  // A kicked round does the kicks' databases; the others, and what is due by age elsewhere, wait
  // for the scheduled round.
  const bool partial = round.kicked && !round.kicked_for.empty();
  // Every round purges what is due then, and a kicked one comes between: no round to claim. A kept
  // session the server has closed since (a restart, idle_session_timeout) is opened again once.
  bool locked = false;
  for (int attempt = 0; attempt < 2; ++attempt) {
    const bool reused = kept.round_lock != nullptr;
    try {
      if (!reused)
        kept.round_lock = std::make_unique<RoundLock>(store_conninfo, "predrop-quarantine-purger", kQuarantineLockClass,
                                                      kQuarantineStoreTable);
      locked = kept.round_lock->try_lock();
      break;
    } catch (const std::exception&) {
      kept.round_lock.reset();
      if (!reused) throw;
    }
  }
  // The lock is the round's alone; the session stays only for the rounds kicks ask for.
  struct EndOfRound {
    Kept& kept;
    bool keep;
    ~EndOfRound() {
      if (kept.round_lock) kept.round_lock->release();
      if (!keep) kept.close_sessions();
    }
  } end_of_round{kept, partial};
  if (!locked) {
    log.debug("quarantine: another predrop holds the purge lock; skipping this round");
    return;
  }
  PgSession& store = kept.round_lock->session();
  bool store_ok = true;
  auto store_warn = [&](const std::exception& e) {
    if (store_ok) log.warn("quarantine: store rows not reconciled: {}", e.what());
    store_ok = false;
  };
  std::vector<Held> all;
  std::set<std::string> scanned;
  int64_t now = 0;
  // A session in a database, however short, makes the server refuse ALTER DATABASE's RENAME and
  // SET TABLESPACE, DROP DATABASE without FORCE and CREATE DATABASE from it as a template ("is
  // being accessed by other users"). So a scheduled round walks every database only at the
  // process's first round and then hourly, to find a quarantine nobody recorded (a sidecar that
  // died between a move and its store row); the others walk the databases the store holds tables
  // of, those this process quarantined in since the last round, and those a walk found a
  // quarantine schema in.
  const auto steady_now = std::chrono::steady_clock::now();
  bool walk_all = !partial && (!kept.walked_all_at || steady_now - *kept.walked_all_at >= kWalkAllEvery);
  std::set<std::string> some(round.kicked_for.begin(), round.kicked_for.end());
  if (!partial && !walk_all) {
    for (const auto& [name, d] : kept.databases) some.insert(name);
    try {
      auto r = store.exec(std::string("SELECT DISTINCT database_name FROM ") + kQuarantineStoreTable +
                              " WHERE state = 'held' AND quarantine_schema = $1",
                          Params{qs.schema});
      for (int i = 0; i < r.rows(); ++i) some.insert(r.text(i, 0));
    } catch (const std::exception& e) {
      store_warn(e);
      walk_all = true;
    }
  }
  const std::vector<std::string> walk =
      walk_all ? connectable_databases(cfg->capture_conninfo, "predrop-quarantine-purger")
               : std::vector<std::string>(some.begin(), some.end());
  if (walk_all) kept.walked_all_at = steady_now;
  for (const auto& name : walk) {
    if (fs.stopping()) break;
    auto& d = kept.databases[name];
    for (int attempt = 0; attempt < 2; ++attempt) {
      const bool reused = d.session != nullptr;
      try {
        if (!reused)
          d.session = std::make_shared<PgSession>(evidence::conninfo_with_dbname(cfg->capture_conninfo, name),
                                                  "predrop-quarantine-purger");
        auto& db = *d.session;
        // Only a quarantine this role owns (it ran the prepare SQL, or is a member of who did)
        // is this predrop's to count and purge: another fleet's is left to that fleet.
        auto own = db.exec("SELECT pg_has_role(nspowner, 'MEMBER'), extract(epoch FROM now())::bigint "
                           "FROM pg_namespace WHERE nspname = $1",
                           Params{qs.schema});
        if (own.rows() == 0 || own.text(0, 0) != "t") {
          kept.databases.erase(name);
          break;
        }
        std::map<std::string, int64_t> known = d.bytes;
        if (partial && store_ok) {
          try {
            add_recorded_bytes(store, name, qs.schema, known);
          } catch (const std::exception& e) {
            store_warn(e);
          }
        }
        auto held = list_held(db, name, qs.schema, partial ? &known : nullptr);
        now = std::stoll(own.text(0, 1));
        scanned.insert(name);
        d.bytes.clear();
        std::set<std::string> listed;
        std::vector<HeldTable> unrecorded;
        for (const auto& h : held) {
          d.bytes[h.quarantine_table] = h.bytes;
          listed.insert(h.id());
          if (!partial || !d.recorded.count(h.id())) unrecorded.push_back(h);
        }
        try {
          if (store_ok) {
            store_record_held(store, qs.schema, unrecorded, qs.retention_s);
            d.recorded = std::move(listed);
          }
        } catch (const std::exception& e) {
          d.recorded.clear();
          store_warn(e);
        }
        for (auto& h : held) all.push_back({std::move(h), d.session});
        break;
      } catch (const std::exception& e) {
        d = {};
        if (reused) continue;
        kept.databases.erase(name);
        log.warn("quarantine: database {} not scanned: {}", name, e.what());
        break;
      }
    }
  }
  std::stable_sort(all.begin(), all.end(), [](const Held& a, const Held& b) { return a.t.dropped_at < b.t.dropped_at; });
  auto& counts = quarantine::metrics();
  std::vector<bool> still_held(all.size(), true);
  auto describe = [&](size_t i) {
    const auto& h = all[i].t;
    return h.database + " " + h.detail.value("schema", "") + "." + h.detail.value("table", "") + " (id " + h.id() +
           ", " + qs.schema + "." + h.quarantine_table + ")";
  };
  auto purge = [&](size_t i, const char* reason) {
    const auto& h = all[i].t;
    const std::string what = describe(i);
    try {
      auto outcome = purge_held(*all[i].db, qs.schema, h, qs.lock_timeout_ms);
      if (outcome == PurgeOutcome::lock_timeout) {
        log.info("quarantine: purge ({}) of {} skipped: another session holds a lock on it (lock_timeout {} ms); "
                 "retried next round", reason, what, qs.lock_timeout_ms);
        return false;
      }
      still_held[i] = false;
      if (outcome == PurgeOutcome::dropped) {
        log.info("quarantine: purged ({}) {}", reason, what);
        (std::string(reason) == "expired" ? counts.purged_expired : counts.purged_cap).fetch_add(1);
      }
      try {
        if (store_ok) store_mark(store, h, qs.schema, "purged", reason);
      } catch (const std::exception& e) {
        store_warn(e);
      }
      return true;
    } catch (const std::exception& e) {
      log.warn("quarantine: purge ({}) of {} failed: {}", reason, what, e.what());
      return false;
    }
  };
  auto due = [&](size_t i) { return all[i].t.dropped_at + qs.retention_s <= now; };
  // The caps are per database (a quarantine schema is): within each, oldest first.
  auto over_cap = [&](const std::vector<bool>& held, const std::string& database) {
    uint64_t n = 0, bytes = 0;
    for (size_t i = 0; i < all.size(); ++i)
      if (held[i] && all[i].t.database == database) ++n, bytes += static_cast<uint64_t>(all[i].t.bytes);
    return (qs.max_tables > 0 && n > qs.max_tables) || (qs.max_bytes > 0 && bytes > qs.max_bytes);
  };
  // Planned first: what outlived retention, then what keeps its database over a cap. Each
  // database's lot goes in one transaction: under a churn at a cap a kicked round purges about
  // as many tables as there were DROPs since the last one. A lot that fails (a lock an application
  // holds on one table, any error) is purged again one table at a time, where a locked table is
  // passed over for the next oldest.
  std::map<std::string, std::vector<size_t>> lots;
  std::vector<const char*> reason_of(all.size(), nullptr);
  {
    std::vector<bool> left = still_held;
    for (size_t i = 0; i < all.size(); ++i)
      if (due(i)) reason_of[i] = "expired", left[i] = false;
    for (size_t i = 0; i < all.size(); ++i)
      if (left[i] && over_cap(left, all[i].t.database)) reason_of[i] = "cap", left[i] = false;
    for (size_t i = 0; i < all.size(); ++i)
      if (reason_of[i]) lots[all[i].t.database].push_back(i);
  }
  auto purge_lot = [&](const std::vector<size_t>& lot) {
    std::vector<HeldTable> tables;
    std::vector<std::string> reasons;
    for (size_t i : lot) tables.push_back(all[i].t), reasons.push_back(reason_of[i]);
    std::optional<std::vector<PurgeOutcome>> outcomes;
    try {
      outcomes = purge_held_together(*all[lot.front()].db, qs.schema, tables, qs.lock_timeout_ms);
    } catch (const std::exception& e) {
      log.warn("quarantine: purging {} tables of database {} together failed, one at a time instead: {}",
               tables.size(), tables.front().database, e.what());
    }
    if (!outcomes) return false;
    for (size_t k = 0; k < lot.size(); ++k) {
      still_held[lot[k]] = false;
      if ((*outcomes)[k] != PurgeOutcome::dropped) continue;
      log.info("quarantine: purged ({}) {}", reasons[k], describe(lot[k]));
      (reasons[k] == "expired" ? counts.purged_expired : counts.purged_cap).fetch_add(1);
    }
    try {
      if (store_ok) store_mark_many(store, tables, qs.schema, "purged", reasons);
    } catch (const std::exception& e) {
      store_warn(e);
    }
    return true;
  };
  // At most kLotTables a transaction: each table dropped holds a few locks (its TOAST table, its
  // indexes) until the commit, and a lot of thousands (a first round after a long stop) would
  // fill the server's shared lock table, which every session draws on.
  constexpr size_t kLotTables = 32;
  for (const auto& [database, lot] : lots) {
    for (size_t from = 0; from < lot.size() && !fs.stopping(); from += kLotTables) {
      const std::vector<size_t> part(lot.begin() + from, lot.begin() + std::min(lot.size(), from + kLotTables));
      if (part.size() > 1 && purge_lot(part)) continue;
      for (size_t i = 0; i < all.size() && !fs.stopping(); ++i)
        if (all[i].t.database == database && still_held[i] && due(i)) purge(i, "expired");
      for (size_t i = 0; i < all.size() && !fs.stopping(); ++i)
        if (all[i].t.database == database && still_held[i] && over_cap(still_held, database)) purge(i, "cap");
      break;
    }
  }
  for (const auto& name : scanned) kept.databases[name].tables = kept.databases[name].held_bytes = 0;
  for (size_t i = 0; i < all.size(); ++i)
    if (still_held[i]) {
      auto& d = kept.databases[all[i].t.database];
      ++d.tables;
      d.held_bytes += all[i].t.bytes;
    }
  // A database a scheduled round no longer finds (dropped, closed to connections, not scanned) leaves
  // the figures.
  if (!partial) std::erase_if(kept.databases, [&](const auto& d) { return !scanned.count(d.first); });
  int64_t tables = 0, bytes = 0, largest = 0;
  for (const auto& [name, d] : kept.databases) {
    tables += d.tables;
    bytes += d.held_bytes;
    largest = std::max(largest, d.held_bytes);
  }
  counts.tables = tables;
  counts.bytes = bytes;
  counts.largest_database_bytes = largest;
  counts.max_bytes = qs.max_bytes;
  counts.scanned = true;
  // Rows still 'held' for tables no database lists any more: gone by other hands (a DROP by the
  // schema's owner, a restore of an old predrop): say so rather than count them as held.
  if (store_ok && !partial) {
    try {
      std::vector<std::string> ids, dbnames;
      for (size_t i = 0; i < all.size(); ++i)
        if (still_held[i]) ids.push_back(all[i].t.id());
      for (const auto& d : scanned) dbnames.push_back(d);
      auto arr = [](const std::vector<std::string>& v) {
        nlohmann::json j = v;
        return j.dump();
      };
      store.exec(std::string("UPDATE ") + kQuarantineStoreTable +
                    " SET state = 'purged', state_at = now(), state_reason = 'missing' WHERE state = 'held'"
                    " AND quarantine_schema = $1 AND database_name IN (SELECT jsonb_array_elements_text($2::jsonb))"
                    " AND id::text NOT IN (SELECT jsonb_array_elements_text($3::jsonb)) AND dropped_at < now() - interval '1 minute'",
                Params{qs.schema, arr(dbnames), arr(ids)});
      counts.undrops = std::stoll(
          store.exec(std::string("SELECT count(*) FROM ") + kQuarantineStoreTable + " WHERE state = 'restored'").text(0, 0));
    } catch (const std::exception& e) {
      store_warn(e);
    }
  }
}

}  // namespace

Purger::Purger(std::shared_ptr<const policy::Config> config, std::string config_path, FleetSchedule::Overrides overrides) {
  FleetSchedule::Task task;
  task.name = "quarantine: purge";
  task.interval_s = [](const policy::Config& c) { return settings_of(c).purge_interval_s; };
  auto kept = std::make_shared<Kept>();
  task.run = [kept](FleetSchedule& fs, spdlog::logger& log, const std::shared_ptr<const policy::Config>& cfg,
                    const FleetSchedule::Round& round) { round_of(*kept, fs, log, cfg, round); };
  task.idle_after = [](const policy::Config& c) { return std::chrono::seconds(c.capture_idle_close_s); };
  task.on_idle = [kept] { kept->close_sessions(); };
  // A new table in quarantine: a cap it passes is enforced now, oldest first, not next round.
  // Under churn every DROP quarantines a table and kicks; a round costs more than the DROP, so
  // kicked rounds start at most one a second, each purges everything over the caps in the
  // databases its kicks name (issue 21: predrop's CPU per quarantined DROP fell from 3.7 ms).
  task.kick_starts_round = [](const policy::Config& c) { return c.quarantine_max_tables > 0 || c.quarantine_max_bytes != 0; };
  task.kicked_round_spacing = std::chrono::seconds(1);
  schedule_ = std::make_unique<FleetSchedule>(std::move(config), std::move(config_path), std::move(overrides), std::move(task));
  set_table_quarantined_listener([s = schedule_.get()](const std::string& database) { s->kick(database); });
}

Purger::~Purger() { stop(); }

void Purger::stop() {
  set_table_quarantined_listener({});
  schedule_->stop();
}

}  // namespace predrop::quarantine
