// The hold: a destructive statement waits here until every target's snapshot is written,
// the capture fails, or hold_timeout_ms passes. Fail open unless policy says closed.
#include "proxy/hold.hpp"

#include <spdlog/spdlog.h>

#include "proxy/metrics.hpp"

namespace predrop::proxy {

namespace asio = boost::asio;

namespace {

// What a quarantined DROP's move writes into its tables' comments (QuarantineMove::hold_id): this
// process, the session and how many outcome checks earlier holds of the session's open
// transaction left (the tracker keeps them to the transaction's end, through ROLLBACK TO). So two
// sessions' moves differ, and so do two holds of one transaction: an outcome check claims only its
// own hold's move, not one it waited on and then found nothing to move after (IF EXISTS), nor a
// later DROP's after a ROLLBACK TO SAVEPOINT undid its own (a pipeline's Executes are holds of
// their own too). Two DROPs of one table in one Query's text are one hold, with one check for the
// table. The id is not unique across transactions: the substitute's text then stays the same from
// one autocommit DROP of a table to the next, and pg_stat_statements keeps one entry for it rather
// than one per DROP. Where two checks do claim one move (a rolled-back transaction's check after
// the next transaction moved the table again), record_each_sql gives it to the later DROP, whose
// move stood.
std::string quarantine_hold_id(uint64_t session, size_t checks_awaiting_end) {
  static const std::string process = capture::new_uuid();
  return process + "." + std::to_string(session) + "." + std::to_string(checks_awaiting_end);
}

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

// How the catalog read finds what a destroyed target names: a schema's relations, a role's, or the
// relation itself (with its partitions) for every other kind.
capture::TargetKind target_kind_of(parser::DestroyKind kind) {
  switch (kind) {
    case parser::DestroyKind::drop_schema: return capture::TargetKind::schema;
    case parser::DestroyKind::drop_owned: return capture::TargetKind::owned_by;
    default: return capture::TargetKind::relation;
  }
}

capture::YieldKind yield_kind_of(parser::YieldTarget::Kind kind) {
  switch (kind) {
    case parser::YieldTarget::Kind::role: return capture::YieldKind::role;
    case parser::YieldTarget::Kind::tablespace: return capture::YieldKind::tablespace;
    case parser::YieldTarget::Kind::access_method: return capture::YieldKind::access_method;
    case parser::YieldTarget::Kind::operator_class: return capture::YieldKind::operator_class;
    case parser::YieldTarget::Kind::operator_family: return capture::YieldKind::operator_family;
    case parser::YieldTarget::Kind::extension: return capture::YieldKind::extension;
  }
  return capture::YieldKind::role;
}

// The quarantine schema's preparation, built once per relay thread and schema: a pure function of
// the schema, about 30 KB, which every quarantined DROP built, copied and hashed anew (issue 21).
// The schema changes only with a reload, so one entry a thread is the whole cache.
std::shared_ptr<const capture::PrepareStep> prepare_step(const std::string& schema) {
  thread_local std::shared_ptr<const capture::PrepareStep> last;
  thread_local std::string last_schema;
  if (!last || last_schema != schema) {
    auto step = std::make_shared<capture::PrepareStep>();
    step->sql = quarantine::prepare_sql(schema);
    step->id = "quarantine prepare " + std::to_string(std::hash<std::string>{}(step->sql));
    last = std::move(step);
    last_schema = schema;
  }
  return last;
}

}  // namespace

policy::Who who_of(const capture::StatementContext& context) {
  return {context.session_user, context.application_name, context.client_addr};
}

policy::Decision decide_relation(const policy::Config& cfg, const std::string& db, const policy::Who& who,
                                 const parser::RelationName& relation, parser::DestroyKind kind,
                                 const std::vector<std::string>& effective, std::string& schema_for_policy) {
  if (!relation.schema.empty() || kind == parser::DestroyKind::drop_schema) {
    schema_for_policy = relation.schema.empty() ? relation.name : relation.schema;
    return cfg.decide(db, schema_for_policy, relation.name, kind, who);
  }
  // Unqualified: the table's schema is known only once capture resolves it, so the first
  // schema of the path that a rule names decides ("$user" rarely exists; public usually does).
  schema_for_policy = effective.empty() ? std::string() : effective.front();
  policy::Decision decision = cfg.decide(db, schema_for_policy, relation.name, kind, who);
  for (const auto& candidate : effective) {
    auto d = cfg.decide(db, candidate, relation.name, kind, who);
    if (d.rule_index >= 0) {
      schema_for_policy = candidate;
      return d;
    }
  }
  return decision;
}

HoldPlan plan_hold(const policy::Config& cfg, const HoldInput& in) {
  HoldPlan plan;
  const std::string& db = in.context.database;
  const policy::Who who = who_of(in.context);
  capture::SnapshotRequest& req = plan.request;
  req.ctx = in.context;
  req.session = in.session;
  // Targets in statement order, each with the search_path in force at that point of the string.
  parser::SearchPathTracker path = in.search_path;
  // Several statements in one Query, or an Execute's segment up to its Sync, run in one implicit
  // transaction: SET LOCAL holds to its end.
  bool in_block = in.transaction_status != 'I' || in.type == 'E' || in.facts->statements.size() > 1;
  for (size_t index = 0; index < in.facts->statements.size(); ++index) {
    const parser::Statement& st = in.facts->statements[index];
    apply_statement(&path, st, in_block, in.transaction_status);
    if (st.temporary) continue;
    quarantine::QuarantineStatement quarantine{index, {cfg.quarantine_schema, {}, {}, false, cfg.quarantine_max_bytes}, false};
    bool quarantines = false;
    for (const auto& t : st.targets) {
      metrics().intercepted_by_kind[static_cast<size_t>(t.kind)].fetch_add(1);
      auto effective = path.effective(in.user);
      std::string schema_for_policy;
      policy::Decision decision = decide_relation(cfg, db, who, t.relation, t.kind, effective, schema_for_policy);
      const bool quarantined = decision.action == policy::Action::quarantine &&
                               (t.kind == parser::DestroyKind::drop_table || t.kind == parser::DestroyKind::drop_schema);
      if (t.kind == parser::DestroyKind::drop_table)
        quarantine.move.tables.push_back({t.relation.schema, t.relation.name, quarantined});
      if (t.kind == parser::DestroyKind::drop_schema && quarantined) {
        quarantine.move.schemas.push_back(t.relation.name);
        quarantine.drop_schema = true;
      }
      quarantine.move.cascade = quarantine.move.cascade || t.cascade;
      quarantines = quarantines || quarantined;
      if (decision.action == policy::Action::skip) {
        plan.skipped.emplace_back(schema_for_policy, t.relation.name);
        continue;
      }
      if (decision.on_failure == policy::OnFailure::closed) plan.fail_closed = true;
      capture::TargetSpec spec;
      spec.kind = target_kind_of(t.kind);
      spec.schema = t.relation.schema;
      spec.name = t.relation.name;
      spec.roles = t.roles;
      req.targets.push_back(std::move(spec));
      if (req.search_path.empty()) req.search_path = effective;
    }
    if (!st.yields.empty() && cfg.quarantines_in(db)) {
      for (const auto& y : st.yields) {
        req.yields.push_back(capture::YieldSpec{yield_kind_of(y.kind), y.name, y.schema, y.method});
      }
      req.yield_schema = cfg.quarantine_schema;
      if (req.search_path.empty()) req.search_path = path.effective(in.user);
      if (req.ctx.statement_kind.empty()) req.ctx.statement_kind = parser::to_string(st.yields.front().kind);
    }
    if (quarantines) {
      // Only a statement a quarantine covers asks (the registry takes a process-wide lock).
      quarantine.move.via_function = quarantine::move_function_usable(db);
      plan.quarantine.statements.push_back(std::move(quarantine));
    }
  }
  // One DO block: it creates the schema only when missing (CREATE SCHEMA checks CREATE on the
  // database before IF NOT EXISTS; a least-privilege role's operator makes the schema).
  if (!plan.quarantine.empty()) {
    try {
      req.prepare = prepare_step(cfg.quarantine_schema);
    } catch (const std::exception&) {
      // A schema name the block cannot quote: no preparation; the move then falls back by itself.
    }
  }
  return plan;
}

void CaptureForHold::snapshot(capture::SnapshotRequest request, std::function<void(capture::SnapshotResult)> done) {
  service_.snapshot(std::move(request), std::move(done));
}

void CaptureForHold::record_event(capture::EventRecord event) { service_.record_event(std::move(event)); }

void CaptureForHold::mark_hold(const std::vector<capture::TableResult>& tables, double hold_ms) {
  service_.mark_hold(tables, hold_ms);
}

void record_intercepted(HoldCapture* capture, capture::StatementContext context, SnapshotOutcome outcome,
                        std::string schema, std::string table) {
  if (!capture) return;
  capture::EventRecord ev;
  ev.ctx = std::move(context);
  ev.outcome = outcome;
  ev.schema = std::move(schema);
  ev.table = std::move(table);
  capture->record_event(std::move(ev));
}

void Hold::begin(HoldInput in, std::shared_ptr<const policy::Config> cfg, HoldCapture* capture) {
  cfg_ = std::move(cfg);
  capture_ = capture;
  started_ = std::chrono::steady_clock::now();
  type_ = in.type;
  held_bytes_ = in.held_bytes;
  tracks_shape_changes_ = in.tracks_shape_changes;
  context_ = std::make_unique<capture::StatementContext>(in.context);
  const std::string& client = context_->client_addr;
  HoldPlan plan = plan_hold(*cfg_, in);
  ++count_;
  tables_.clear();
  for (const auto& t : plan.request.targets)
    tables_ += (tables_.empty() ? "" : ", ") + (t.schema.empty() ? t.name : t.schema + "." + t.name);
  substitute_.reset();
  quarantine_schema_.clear();
  quarantine_hold_id_.clear();
  if (!plan.quarantine.empty()) {
    const std::string hold_id = quarantine_hold_id(in.session, in.checks_awaiting_end);
    for (auto& st : plan.quarantine.statements) st.move.hold_id = hold_id;
    std::optional<quarantine::SubstitutedText> text;
    try {
      text = quarantine::substitute_text(*in.facts, plan.quarantine);
    } catch (const std::exception& e) {
      spdlog::warn("session {}: quarantine not possible for this statement ({}); it runs as sent", client, e.what());
    }
    if (text) {
      substitute_ = std::make_unique<quarantine::SubstitutedText>(std::move(*text));
      quarantine_schema_ = cfg_->quarantine_schema;
      quarantine_hold_id_ = hold_id;
      quarantine_retention_s_ = cfg_->quarantine_retention_s;
    } else {
      metrics().quarantine_fallbacks.fetch_add(1, std::memory_order_relaxed);
      spdlog::warn("session {}: a quarantine rule covers a statement whose text predrop cannot substitute (fingerprint {}); "
                   "it runs as sent, after its snapshot", client, in.facts->fingerprint);
    }
  }

  for (const auto& [schema, table] : plan.skipped) {
    metrics().count_snapshot(SnapshotOutcome::policy_skip);
    record_intercepted(capture_, *context_, SnapshotOutcome::policy_skip, schema, table);
  }

  auto exec = host_.hold_executor();
  std::weak_ptr<void> alive = host_.hold_lifetime();
  bool disabled = !cfg_->snapshots_enabled || !capture_;
  if ((plan.request.targets.empty() && plan.request.yields.empty()) || disabled) {
    if (disabled && !plan.request.targets.empty()) {
      metrics().count_snapshot(SnapshotOutcome::disabled);
      record_intercepted(capture_, *context_, SnapshotOutcome::disabled);
    }
    // Nothing to wait for: relay at once, but not from inside the scan that began the hold.
    uint64_t id = machine_.begin(false);
    asio::post(exec, [this, alive, id]() {
      if (!alive.lock() || stopped_) return;
      if (auto ending = machine_.on(HoldMachine::Event::nothing_to_wait, id)) end(*ending);
    });
    return;
  }

  uint64_t id = machine_.begin(plan.fail_closed);
  plan.request.deadline = started_ + std::chrono::milliseconds(cfg_->hold_timeout_ms);
  // The capture service owns the deadline: at it, it answers "timeout" naming every target and
  // writes the ledger rows. This timer is only a backstop should that answer not arrive.
  if (!timer_) timer_ = std::make_unique<asio::steady_timer>(exec);
  timer_->expires_at(plan.request.deadline + std::chrono::milliseconds(50));
  timer_->async_wait([this, alive, id](boost::system::error_code ec) {
    if (ec) return;
    if (alive.lock()) on_timeout(id);
  });
  // `this` is a member of the host: it lives as long as `alive` does.
  capture_->snapshot(std::move(plan.request), [this, alive, id, exec](capture::SnapshotResult result) {
    asio::post(exec, [this, alive, id, result = std::move(result)]() mutable {
      if (alive.lock()) on_capture_done(id, std::move(result));
    });
  });
}

void Hold::on_capture_done(uint64_t id, capture::SnapshotResult result) {
  if (stopped_ || !machine_.active() || machine_.id() != id) return;
  const std::string& client = context_->client_addr;
  double hold_ms = ms_since(started_);
  metrics().capture_duration.observe(result.capture_ms / 1000.0);
  for (size_t i = 0; i < result.phases.ms.size(); ++i)
    if (result.phases.ms[i] >= 0) metrics().capture_phase[i].observe(result.phases.ms[i] / 1000.0);
  // A table whose outcome is checked gets its hold_ms with that outcome; the others (misses,
  // tables already gone) in one update of their own.
  std::vector<capture::TableResult> unconfirmed;
  std::vector<capture::PendingOutcome> outcome_checks;
  for (const auto& t : result.tables) {
    metrics().count_snapshot(t.outcome);
    if (t.oid != 0 && (t.outcome == SnapshotOutcome::written || (substitute_ && t.outcome == SnapshotOutcome::deduplicated))) {
      capture::PendingOutcome p{t.oid,
                                t.snapshot_id,
                                t.event_id,
                                quarantine_schema_,
                                quarantine_retention_s_,
                                context_->application_name,
                                context_->client_addr,
                                hold_ms,
                                t.outcome == SnapshotOutcome::written};
      p.hold_id = quarantine_hold_id_;
      outcome_checks.push_back(std::move(p));
    } else {
      unconfirmed.push_back(t);
    }
  }
  if (result.tables.empty() && !tables_.empty()) metrics().count_snapshot(result.outcome);
  for (const auto& y : result.yielded) {
    metrics().quarantine_yielded[static_cast<size_t>(y.to)].fetch_add(1, std::memory_order_relaxed);
    spdlog::info("session {}: quarantined {}.{} purged so that {} answers as direct", client, y.schema, y.table,
                 context_->statement);
  }
  if (!result.yield_error.empty()) metrics().quarantine_yield_failures.fetch_add(1, std::memory_order_relaxed);
  std::vector<HeldTable> captured;
  if (tracks_shape_changes_)
    for (const auto& t : result.tables)
      if (t.oid != 0 && !t.snapshot_id.empty()) captured.push_back({t.schema, t.table, t.oid, t.snapshot_id});
  if (!unconfirmed.empty()) capture_->mark_hold(unconfirmed, hold_ms);
  auto ending = machine_.on(result.ok() ? HoldMachine::Event::capture_ok : HoldMachine::Event::capture_failed, id);
  if (!ending) return;
  if (*ending == HoldEnding::failed_open) {
    spdlog::warn("session {}: snapshot failed ({}: {}); statement relayed (fail open)", client,
                 capture::to_string(result.outcome), result.error);
    // A table the catalog read found but whose snapshot was missed: its DROP goes on, and whether it
    // went through is recorded on its ledger row as for a written one, so that the store knows the
    // table gone (`predrop ages`). hold_ms is already on its way to that row (mark_hold).
    for (const auto& t : result.tables)
      if (t.oid != 0 && !t.event_id.empty() && t.snapshot_id.empty() && !capture::is_kept(t.outcome))
        outcome_checks.push_back(capture::PendingOutcome{t.oid, {}, t.event_id, quarantine_schema_, quarantine_retention_s_,
                                                         context_->application_name, context_->client_addr,
                                                         std::nullopt, false, false, quarantine_hold_id_});
  }
  if (*ending != HoldEnding::refused) return end(*ending, {}, {}, std::move(captured), std::move(outcome_checks));
  std::string what;
  for (const auto& t : result.tables) {
    if (!what.empty()) what += ", ";
    what += t.schema + "." + t.table;
  }
  end(HoldEnding::refused, "55000",
      "predrop: refused " + context_->statement_kind + (what.empty() ? "" : " of " + what) +
          ": the snapshot could not be written (" + capture::to_string(result.outcome) +
          (result.error.empty() ? "" : ": " + result.error) + ")",
      std::move(captured), std::move(outcome_checks));
}

void Hold::on_timeout(uint64_t id) {
  if (stopped_) return;
  auto ending = machine_.on(HoldMachine::Event::timeout, id);
  if (!ending) return;
  metrics().count_snapshot(SnapshotOutcome::timeout);
  spdlog::warn("session {}: snapshot not written within {} ms; statement relayed{}", context_->client_addr,
               cfg_->hold_timeout_ms, *ending == HoldEnding::refused ? " as an error (fail closed)" : " (fail open)");
  if (*ending != HoldEnding::refused) return end(*ending);
  end(HoldEnding::refused, "55000",
      "predrop: refused " + context_->statement_kind + ": the snapshot was not written within " +
          std::to_string(cfg_->hold_timeout_ms) + " ms");
}

void Hold::cancel() {
  auto ending = machine_.on(HoldMachine::Event::cancel, 0);
  if (!ending) return;
  // The held statement never reached the server, so there is nothing there to cancel: the
  // client gets the error a cancelled statement gets, raised by the server in its place.
  spdlog::info("session {}: cancel request ended a hold; the statement was not relayed", context_->client_addr);
  end(HoldEnding::cancelled, "57014", "canceling statement due to user request");
}

void Hold::client_gone() {
  auto ending = machine_.on(HoldMachine::Event::client_gone, 0);
  if (!ending) return;
  spdlog::info("session {}: client left during a hold; the held statement is discarded", context_->client_addr);
  end(HoldEnding::client_left);
}

void Hold::stop() {
  stopped_ = true;
  if (timer_) timer_->cancel();
}

// The held message is relayed (released, failed open: as sent, or as its quarantine substitute),
// replaced by a statement that raises in its place (refused, cancelled), or dropped with the
// session (client_left).
void Hold::end(HoldEnding ending, std::string sqlstate, std::string message, std::vector<HeldTable> captured,
               std::vector<capture::PendingOutcome> outcome_checks) {
  if (timer_) timer_->cancel();
  metrics().hold_duration.observe(ms_since(started_) / 1000.0);
  metrics().hold_endings[static_cast<size_t>(ending)].fetch_add(1, std::memory_order_relaxed);
  HoldEnd e;
  e.ending = ending;
  e.captured = std::move(captured);
  e.outcome_checks = std::move(outcome_checks);
  switch (ending) {
    case HoldEnding::released:
    case HoldEnding::failed_open:
      if (substitute_) {
        metrics().quarantine_substitutions.fetch_add(1, std::memory_order_relaxed);
        e.stand_in = substitute_stand_in(type_, substitute_->sql,
                                         std::make_shared<const Substitutes>(substitute_->substitutes));
      }
      break;
    case HoldEnding::refused:
    case HoldEnding::cancelled:
      metrics().rejected_statements.fetch_add(1);
      e.stand_in = refusal_stand_in(type_, sqlstate, message);
      break;
    case HoldEnding::client_left: break;
  }
  host_.hold_ended(std::move(e));
}

}  // namespace predrop::proxy
