// The after of a committed shape change: the decoder saw the server complete it and the
// transaction commit (decoder.hpp, ShapeOutcomes); here policy picks what is covered and the
// capture service takes the requests, after ReadyForQuery went on to the client. A prepared
// transaction's requests wait in the ProxyContext until a COMMIT PREPARED, from any session.
#include <spdlog/spdlog.h>

#include <map>

#include "proxy/metrics.hpp"
#include "proxy/session.hpp"

namespace predrop::proxy {

template <class Item>
void ByPreparedTransaction<Item>::forgotten(const std::string& database, const std::string& gid) const {
  spdlog::warn("predrop: more than {} prepared transactions wait; the {} of '{}' in database '{}' are forgotten", kMax,
               what_, gid, database);
}
template class ByPreparedTransaction<capture::SnapshotRequest>;
template class ByPreparedTransaction<capture::PendingOutcome>;

namespace {

// One request per reason and search_path; a relation changed twice in a transaction is captured
// once, as created if any change created it.
std::vector<capture::SnapshotRequest> after_requests(const policy::Config& cfg, const std::vector<CompletedChange>& changes,
                                                    const capture::StatementContext& base, const std::string& user) {
  struct Wanted {
    bool created = false;
    const CompletedChange* last = nullptr;
    std::string before_id;
    std::vector<std::string> effective;
  };
  std::map<std::string, Wanted> by_relation;
  std::vector<std::string> order;
  for (const auto& c : changes) {
    auto effective = parser::SearchPathTracker(c.search_path).effective(user);
    const bool created = c.change.kind == parser::ShapeChange::Kind::create;
    // A recreate completes a drop, an ALTER completes an alter: the rule for that kind covers it.
    auto kind = created ? parser::DestroyKind::drop_table : parser::DestroyKind::alter_table;
    std::string schema_for_policy;
    if (decide_relation(cfg, base.database, who_of(base), c.change.relation, kind, effective, schema_for_policy)
            .action == policy::Action::skip)
      continue;
    // The same table changed twice is one after: by OID when a hold followed it, else by name.
    std::string key = c.oid ? "#" + std::to_string(c.oid) : c.change.relation.schema + '\0' + c.change.relation.name;
    if (!c.oid && c.change.relation.schema.empty())
      for (const auto& s : effective) key += '\0' + s;
    auto [it, fresh] = by_relation.try_emplace(key);
    if (fresh) order.push_back(key);
    Wanted& w = it->second;
    w.created = w.created || created;
    w.last = &c;
    if (w.before_id.empty()) w.before_id = c.before_id;   // the oldest before of the transaction
    w.effective = std::move(effective);
  }
  std::vector<capture::SnapshotRequest> out;
  for (const auto& key : order) {
    const Wanted& w = by_relation[key];
    const auto reason = w.created ? capture::SnapshotReason::post_create : capture::SnapshotReason::post_alter;
    const auto& relation = w.last->change.relation;
    // Qualified names (and OIDs) share a request with anything of the same reason; unqualified
    // names need their path.
    const bool needs_path = relation.schema.empty() && !w.last->oid;
    capture::SnapshotRequest* req = nullptr;
    for (auto& r : out)
      if (r.reason == reason && (!needs_path || r.search_path == w.effective || r.search_path.empty())) {
        req = &r;
        break;
      }
    if (!req) {
      out.emplace_back();
      req = &out.back();
      req->reason = reason;
      req->ctx = base;
      req->ctx.statement_kind = w.created ? "create_table" : "alter_table";
      req->ctx.statement = w.last->facts ? w.last->facts->normalized : std::string();
      req->ctx.fingerprint = w.last->facts ? w.last->facts->fingerprint : std::string();
    }
    if (needs_path && req->search_path.empty()) req->search_path = w.effective;
    const uint32_t oid = w.last->oid;
    const auto kind = oid ? capture::TargetKind::after_by_oid : capture::TargetKind::after_by_name;
    req->targets.push_back({kind, relation.schema, relation.name, {}, w.before_id, oid});
  }
  return out;
}

}  // namespace

void Session::capture_afters() {
  ShapeOutcomes outcomes = decoder_->transactions().take_shape_outcomes();
  // What is parked or taken changes here, in the order the server's messages came; only the
  // hand-offs to the capture service wait for the reply to be sent (run_after_reply).
  // Whichever session ends a prepared transaction, its DROPs' outcome checks run now.
  for (const auto& [gid, committed] : outcomes.finished_prepared) {
    auto parked = ctx_.prepared_outcomes.take(outcome_database(), gid);
    if (!parked.empty() && ctx_.capture)
      after_reply_.push_back([this, database = outcome_database(), parked = std::move(parked)]() mutable {
        ctx_.capture->confirm_outcomes(std::move(database), std::move(parked));
      });
  }
  auto cfg = ctx_.config();
  if (!ctx_.capture || !cfg->after_capture || !cfg->snapshots_enabled) return;
  const capture::StatementContext* held = hold_.context();
  capture::StatementContext base;
  base.database = held && !held->database.empty() ? held->database : params_.get("database");
  base.session_user = params_.get("user");
  base.application_name = params_.get("application_name");
  base.client_addr = client_addr_;
  const std::string user = params_.get("user");

  std::vector<capture::SnapshotRequest> requests;
  if (!outcomes.committed.empty()) requests = after_requests(*cfg, outcomes.committed, base, user);
  for (auto& [gid, changes] : outcomes.prepared)
    ctx_.prepared_afters.put(base.database, gid, after_requests(*cfg, changes, base, user));
  for (const auto& [gid, committed] : outcomes.finished_prepared) {
    auto parked = ctx_.prepared_afters.take(base.database, gid);
    if (committed)
      for (auto& r : parked) requests.push_back(std::move(r));
  }
  if (requests.empty()) return;
  for (auto& r : requests) {
    // The session whose later holds may absorb them by name: the one that committed them.
    r.session = id_;
    metrics().afters_requested.fetch_add(r.targets.size(), std::memory_order_relaxed);
  }
  after_reply_.push_back([this, requests = std::move(requests)]() mutable {
    for (auto& r : requests) ctx_.capture->capture_after(std::move(r));
  });
}

}  // namespace predrop::proxy
