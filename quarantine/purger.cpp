#include "quarantine/purger.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "quarantine/held.hpp"
#include "quarantine/metrics.hpp"

namespace predrop::quarantine {

using evidence::FleetSchedule;
using evidence::RoundLock;

using capture::Params;
using evidence::PgSession;

namespace {

struct Held {
  HeldTable t;
  std::shared_ptr<PgSession> db;
};

void round_of(FleetSchedule& fs, spdlog::logger& log, const std::shared_ptr<const policy::Config>& cfg,
              const FleetSchedule::Round&) {
  const Settings qs = settings_of(*cfg);
  if (cfg->capture_conninfo.empty()) return;
  // Every round purges what is due then, and a kicked one comes between: no round to claim.
  RoundLock round_lock(evidence::store_conninfo_of(*cfg), "predrop-quarantine-purger", kQuarantineLockClass, kQuarantineStoreTable);
  if (!round_lock.try_lock()) {
    log.debug("quarantine: another predrop holds the purge lock; skipping this round");
    return;
  }
  PgSession& store = round_lock.session();
  bool store_ok = true;
  auto store_warn = [&](const std::exception& e) {
    if (store_ok) log.warn("quarantine: store rows not reconciled: {}", e.what());
    store_ok = false;
  };
  std::vector<Held> all;
  std::set<std::string> scanned;
  int64_t now = 0;
  {
    for (const auto& name : connectable_databases(cfg->capture_conninfo, "predrop-quarantine-purger")) {
      if (fs.stopping()) break;
      try {
        auto db = std::make_shared<PgSession>(evidence::conninfo_with_dbname(cfg->capture_conninfo, name), "predrop-quarantine-purger");
        // Only a quarantine this role owns (it ran the prepare SQL, or is a member of who did)
        // is this predrop's to count and purge: another fleet's is left to that fleet.
        auto own = db->exec("SELECT pg_has_role(nspowner, 'MEMBER') FROM pg_namespace WHERE nspname = $1", Params{qs.schema});
        if (own.rows() == 0 || own.text(0, 0) != "t") continue;
        auto held = list_held(*db, name, qs.schema);
        now = std::stoll(db->exec("SELECT extract(epoch FROM now())::bigint").text(0, 0));
        scanned.insert(name);
        try {
          if (store_ok) store_record_held(store, qs.schema, held, qs.retention_s);
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
  auto& counts = quarantine::metrics();
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
  for (size_t i = 0; i < all.size() && !fs.stopping(); ++i)
    if (all[i].t.dropped_at + qs.retention_s <= now) purge(i, "expired");
  // The caps are per database (a quarantine schema is): within each, oldest first; one that is
  // locked is passed over for the next oldest.
  auto over_cap = [&](const std::string& database) {
    uint64_t n = 0, bytes = 0;
    for (size_t i = 0; i < all.size(); ++i)
      if (kept[i] && all[i].t.database == database) ++n, bytes += static_cast<uint64_t>(all[i].t.bytes);
    return (qs.max_tables > 0 && n > qs.max_tables) || (qs.max_bytes > 0 && bytes > qs.max_bytes);
  };
  for (size_t i = 0; i < all.size() && !fs.stopping(); ++i)
    if (kept[i] && over_cap(all[i].t.database)) purge(i, "cap");
  int64_t tables = 0, bytes = 0;
  std::map<std::string, int64_t> per_database;
  for (size_t i = 0; i < all.size(); ++i)
    if (kept[i]) ++tables, bytes += all[i].t.bytes, per_database[all[i].t.database] += all[i].t.bytes;
  int64_t largest = 0;
  for (const auto& [name, b] : per_database) largest = std::max(largest, b);
  counts.tables = tables;
  counts.bytes = bytes;
  counts.largest_database_bytes = largest;
  counts.max_bytes = qs.max_bytes;
  counts.scanned = true;
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
  task.run = round_of;
  // A new table in quarantine: a cap it passes is enforced now, oldest first, not next round.
  // Under churn every DROP quarantines a table and kicks; a round (its connections, its listing,
  // the store's reconciliation) costs more than the DROP, so kicked rounds start at most one a
  // second and each purges everything over the caps (issue 21: predrop's CPU per quarantined DROP
  // fell from 3.7 ms).
  task.kick_starts_round = [](const policy::Config& c) { return c.quarantine_max_tables > 0 || c.quarantine_max_bytes != 0; };
  task.kicked_round_spacing = std::chrono::seconds(1);
  schedule_ = std::make_unique<FleetSchedule>(std::move(config), std::move(config_path), std::move(overrides), std::move(task));
  set_table_quarantined_listener([s = schedule_.get()] { s->kick(); });
}

Purger::~Purger() { stop(); }

void Purger::stop() {
  set_table_quarantined_listener({});
  schedule_->stop();
}

}  // namespace predrop::quarantine
