// The hold: a destructive statement waits here until every target's snapshot is written,
// the capture fails, or hold_timeout_ms passes. Fail open unless policy says closed.
#include "proxy/hold.hpp"

#include <spdlog/spdlog.h>

#include "proxy/metrics.hpp"
#include "proxy/session.hpp"

namespace predrop::proxy {

namespace {

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

// SQL the server runs in place of a refused statement, so that its error, the aborted
// transaction and the next ReadyForQuery are the server's own. The message carries names the
// client chose and error text: it goes into an E'' literal with quotes and backslashes escaped
// (the same whatever standard_conforming_strings says), inside a dollar quote whose tag does not
// occur in it, so no name can end the literal or the DO body early.
std::string raise_sql(std::string_view sqlstate, std::string_view message) {
  std::string literal = wire::e_literal(message);
  std::string tag = "$predrop$";
  for (int n = 0; literal.find(tag) != std::string::npos; ++n) tag = "$predrop" + std::to_string(n) + "$";
  return "DO " + tag + "BEGIN RAISE EXCEPTION USING ERRCODE = '" + std::string(sqlstate) + "', MESSAGE = " + literal +
         "; END" + tag;
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
    QuarantineStatement quarantine{index, {cfg.quarantine_schema, {}, {}, false, cfg.quarantine_max_bytes}, false};
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
      quarantine.move.via_function = capture::move_function_usable(db);
      plan.quarantine.statements.push_back(std::move(quarantine));
    }
  }
  // One DO block: it creates the schema only when missing (CREATE SCHEMA checks CREATE on the
  // database before IF NOT EXISTS; a least-privilege role's operator makes the schema).
  if (!plan.quarantine.empty()) {
    try {
      req.prepare_sql = capture::quarantine_prepare_sql(cfg.quarantine_schema);
    } catch (const std::exception&) {
      // A schema name the block cannot quote: no preparation; the move then falls back by itself.
    }
  }
  return plan;
}

void Hold::begin(HoldInput in) {
  cfg_ = session_.ctx_.config();
  started_ = std::chrono::steady_clock::now();
  type_ = in.type;
  held_bytes_ = in.held_bytes;
  context_ = std::make_unique<capture::StatementContext>(in.context);
  HoldPlan plan = plan_hold(*cfg_, in);
  ++count_;
  tables_.clear();
  for (const auto& t : plan.request.targets)
    tables_ += (tables_.empty() ? "" : ", ") + (t.schema.empty() ? t.name : t.schema + "." + t.name);
  substitute_.reset();
  quarantine_schema_.clear();
  if (!plan.quarantine.empty()) {
    std::optional<SubstitutedText> text;
    try {
      text = substitute_text(*in.facts, plan.quarantine);
    } catch (const std::exception& e) {
      spdlog::warn("session {}: quarantine not possible for this statement ({}); it runs as sent", session_.client_addr_,
                   e.what());
    }
    if (text) {
      substitute_ = std::make_unique<SubstitutedText>(std::move(*text));
      quarantine_schema_ = cfg_->quarantine_schema;
      quarantine_retention_s_ = cfg_->quarantine_retention_s;
    } else {
      metrics().quarantine_fallbacks.fetch_add(1, std::memory_order_relaxed);
      spdlog::warn("session {}: a quarantine rule covers a statement whose text predrop cannot substitute (fingerprint {}); "
                   "it runs as sent, after its snapshot", session_.client_addr_, in.facts->fingerprint);
    }
  }

  for (const auto& [schema, table] : plan.skipped) {
    metrics().count_snapshot(SnapshotOutcome::policy_skip);
    session_.record_ledger(*context_, SnapshotOutcome::policy_skip, schema, table);
  }

  auto exec = session_.executor();
  std::weak_ptr<Session> weak = session_.shared_from_this();
  bool disabled = !cfg_->snapshots_enabled || !session_.ctx_.capture;
  if ((plan.request.targets.empty() && plan.request.yields.empty()) || disabled) {
    if (disabled && !plan.request.targets.empty()) {
      metrics().count_snapshot(SnapshotOutcome::disabled);
      session_.record_ledger(*context_, SnapshotOutcome::disabled);
    }
    // Nothing to wait for: relay at once, but not from inside the scan that began the hold.
    uint64_t id = machine_.begin(false);
    asio::post(exec, [weak, id]() {
      auto self = weak.lock();
      if (!self) return;
      if (auto ending = self->hold_.machine_.on(HoldMachine::Event::nothing_to_wait, id)) self->hold_.end(*ending);
    });
    return;
  }

  uint64_t id = machine_.begin(plan.fail_closed);
  plan.request.deadline = started_ + std::chrono::milliseconds(cfg_->hold_timeout_ms);
  // The capture service owns the deadline: at it, it answers "timeout" naming every target and
  // writes the ledger rows. This timer is only a backstop should that answer not arrive.
  if (!timer_) timer_ = std::make_unique<asio::steady_timer>(exec);
  timer_->expires_at(plan.request.deadline + std::chrono::milliseconds(50));
  timer_->async_wait([weak, id](boost::system::error_code ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->hold_.on_timeout(id);
  });
  session_.ctx_.capture->snapshot(std::move(plan.request), [weak, id, exec](capture::SnapshotResult result) {
    asio::post(exec, [weak, id, result = std::move(result)]() mutable {
      if (auto self = weak.lock()) self->hold_.on_capture_done(id, std::move(result));
    });
  });
}

void Hold::on_capture_done(uint64_t id, capture::SnapshotResult result) {
  if (session_.closed_ || !machine_.active() || machine_.id() != id) return;
  double hold_ms = ms_since(started_);
  metrics().capture_duration.observe(result.capture_ms / 1000.0);
  // A table whose outcome is checked gets its hold_ms with that outcome; the others (misses,
  // tables already gone) in one update of their own.
  std::vector<capture::TableResult> unconfirmed;
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
      session_.pending_outcomes_.push_back(std::move(p));
    } else {
      unconfirmed.push_back(t);
    }
  }
  if (result.tables.empty() && !tables_.empty()) metrics().count_snapshot(result.outcome);
  for (const auto& y : result.yielded) {
    metrics().quarantine_yielded[static_cast<size_t>(y.to)].fetch_add(1, std::memory_order_relaxed);
    spdlog::info("session {}: quarantined {}.{} purged so that {} answers as direct", session_.client_addr_, y.schema,
                 y.table, context_->statement);
  }
  if (!result.yield_error.empty()) metrics().quarantine_yield_failures.fetch_add(1, std::memory_order_relaxed);
  if (session_.decoder_->tracks_shape_changes()) {
    std::vector<HeldTable> held;
    for (const auto& t : result.tables)
      if (t.oid != 0 && !t.snapshot_id.empty()) held.push_back({t.schema, t.table, t.oid, t.snapshot_id});
    session_.decoder_->note_held(std::move(held));
  }
  if (!unconfirmed.empty()) session_.ctx_.capture->mark_hold(unconfirmed, hold_ms);
  auto ending = machine_.on(result.ok() ? HoldMachine::Event::capture_ok : HoldMachine::Event::capture_failed, id);
  if (!ending) return;
  if (*ending == HoldEnding::failed_open)
    spdlog::warn("session {}: snapshot failed ({}: {}); statement relayed (fail open)", session_.client_addr_,
                 capture::to_string(result.outcome), result.error);
  if (*ending != HoldEnding::refused) return end(*ending);
  std::string what;
  for (const auto& t : result.tables) {
    if (!what.empty()) what += ", ";
    what += t.schema + "." + t.table;
  }
  end(HoldEnding::refused, "55000",
      "predrop: refused " + context_->statement_kind + (what.empty() ? "" : " of " + what) +
          ": the snapshot could not be written (" + capture::to_string(result.outcome) +
          (result.error.empty() ? "" : ": " + result.error) + ")");
}

void Hold::on_timeout(uint64_t id) {
  if (session_.closed_) return;
  auto ending = machine_.on(HoldMachine::Event::timeout, id);
  if (!ending) return;
  metrics().count_snapshot(SnapshotOutcome::timeout);
  spdlog::warn("session {}: snapshot not written within {} ms; statement relayed{}", session_.client_addr_,
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
  spdlog::info("session {}: cancel request ended a hold; the statement was not relayed", session_.client_addr_);
  end(HoldEnding::cancelled, "57014", "canceling statement due to user request");
}

void Hold::client_gone() {
  auto ending = machine_.on(HoldMachine::Event::client_gone, 0);
  if (!ending) return;
  spdlog::info("session {}: client left during a hold; the held statement is discarded", session_.client_addr_);
  end(HoldEnding::client_left);
}

void Hold::stop() {
  if (timer_) timer_->cancel();
}

void Hold::end(HoldEnding ending, std::string sqlstate, std::string message) {
  if (timer_) timer_->cancel();
  metrics().hold_duration.observe(ms_since(started_) / 1000.0);
  metrics().hold_endings[static_cast<size_t>(ending)].fetch_add(1, std::memory_order_relaxed);
  session_.end_hold(ending, sqlstate, message);
}

// The session's side of a hold's ending: the held message, whole in the front buffer at scan,
// is relayed, replaced or dropped.
void Session::end_hold(HoldEnding ending, std::string_view sqlstate, const std::string& message) {
  Pipe& p = front_;
  switch (ending) {
    case HoldEnding::released:
    case HoldEnding::failed_open:
      if (const SubstitutedText* sub = hold_.substitute()) {
        // The quarantine: the substitute reaches the server in the message's place (the same
        // statements, so the decoder's entry for it stands), and its replies are made the client's.
        metrics().quarantine_substitutions.fetch_add(1, std::memory_order_relaxed);
        send_in_place_of_held(sub->sql);
        decoder_->substitute_last(std::make_shared<const Substitutes>(sub->substitutes));
        break;
      }
      p.scan += hold_.held_bytes();
      break;
    case HoldEnding::refused:
    case HoldEnding::cancelled:
      metrics().rejected_statements.fetch_add(1);
      send_in_place_of_held(raise_sql(sqlstate, message));
      decoder_->replace_last_with_refusal();
      break;
    case HoldEnding::client_left:
      return close("client left during a hold");
  }
  pump(p);
}

// The held message is dropped whole and `sql` sent in its place. Simple protocol: a Query.
// Extended: Parse + Bind + Execute of the unnamed statement and portal, whose ParseComplete and
// BindComplete are swallowed (the decoder's entries say so); the Execute's reply is the client's,
// and after an error the server skips to the client's Sync.
void Session::send_in_place_of_held(const std::string& sql) {
  Pipe& p = front_;
  p.discard = hold_.held_bytes();
  if (hold_.type() == 'Q') {
    wire::append_message(p.inject, 'Q', std::string_view(sql.c_str(), sql.size() + 1));
    return;
  }
  std::string parse;
  parse.push_back('\0');
  parse.append(sql);
  parse.push_back('\0');
  parse.append("\0\0", 2);
  wire::append_message(p.inject, 'P', parse);
  wire::append_message(p.inject, 'B', std::string_view("\0\0\0\0\0\0\0\0", 8));
  wire::append_message(p.inject, 'E', std::string_view("\0\0\0\0\0", 5));
}

capture::StatementContext Session::statement_context(const parser::Facts& facts) const {
  capture::StatementContext c;
  c.database = database();
  c.session_user = params_.get("user");
  c.application_name = params_.get("application_name");
  c.client_addr = client_addr_;
  c.statement = facts.normalized;
  c.fingerprint = facts.fingerprint;
  for (const auto& st : facts.statements)
    if (!st.targets.empty()) {
      c.statement_kind = std::string(parser::to_string(st.targets.front().kind));
      break;
    }
  return c;
}

// A ledger row for an intercepted statement that never reaches a capture.
void Session::record_ledger(capture::StatementContext context, SnapshotOutcome outcome, std::string schema,
                            std::string table) {
  if (!ctx_.capture) return;
  capture::EventRecord ev;
  ev.ctx = std::move(context);
  ev.outcome = outcome;
  ev.schema = std::move(schema);
  ev.table = std::move(table);
  ctx_.capture->record_event(std::move(ev));
}

bool Session::should_hold(const std::shared_ptr<const parser::Facts>& facts) {
  // A text the parser rejects comes with the scanner fallback's facts: what it read is held
  // below like any parsed target, and what it could not read leaves a trace here.
  if (facts->unparsed()) {
    metrics().unparsed_statements.fetch_add(1);
    // The parser's message can quote a literal of the text: only the normalised text is logged.
    std::string_view text = facts->normalized;
    spdlog::warn("session {}: statement the parser rejects and whose targets cannot be read (fingerprint {}): "
                 "relayed, recorded as unparsed: {}{}",
                 client_addr_, facts->fingerprint, text.substr(0, 200), text.size() > 200 ? "…" : "");
    record_ledger(statement_context(*facts), SnapshotOutcome::unparsed);
  }
  if (facts->unresolved()) {
    metrics().unresolved_statements.fetch_add(1);
    spdlog::warn("session {}: statement may destroy what no parser can see (fingerprint {}): relayed, recorded as unresolved",
                 client_addr_, facts->fingerprint);
    record_ledger(statement_context(*facts), SnapshotOutcome::unresolved);
  }
  if (facts->destroys()) return true;
  // What a quarantined table may still use (issue 22) waits only where a quarantine rule could have
  // put tables in quarantine: elsewhere it is relayed untouched.
  if (!facts->yields() || !ctx_.capture) return false;
  auto cfg = ctx_.config();
  return cfg->snapshots_enabled && cfg->quarantines_in(database());
}

void Session::begin_hold(char type, std::shared_ptr<const parser::Facts> facts, size_t total) {
  HoldInput in;
  in.type = type;
  in.held_bytes = total;
  in.context = statement_context(*facts);
  in.search_path = decoder_->search_path_ahead();
  in.transaction_status = decoder_->transaction_status();
  in.user = params_.get("user");
  in.session = id_;
  in.facts = std::move(facts);
  hold_.begin(std::move(in));
}

void Session::on_cancel_request(std::string packet, std::function<void()> done) {
  if (closed_) return done();
  if (hold_.active()) {
    hold_.cancel();
    return done();
  }
  // Relay the cancel to the server on a fresh connection, as the client would have.
  auto cfg = cfg_;
  auto sock = std::make_shared<tcp::socket>(executor());
  auto resolver = std::make_shared<tcp::resolver>(executor());
  auto data = std::make_shared<std::string>(std::move(packet));
  resolver->async_resolve(cfg->upstream.host, std::to_string(cfg->upstream.port),
                          [sock, resolver, data, done](boost::system::error_code ec, tcp::resolver::results_type results) {
    if (ec) return done();
    asio::async_connect(*sock, results, [sock, data, done](boost::system::error_code ec, const tcp::endpoint&) {
      if (ec) return done();
      asio::async_write(*sock, asio::buffer(*data), [sock, data, done](boost::system::error_code ec, size_t) {
        if (ec) return done();
        // The server closes the connection once the backend has been signalled: wait for that.
        auto sink = std::make_shared<char>();
        sock->async_read_some(asio::buffer(sink.get(), 1), [sock, sink, done](boost::system::error_code, size_t) { done(); });
      });
    });
  });
}

void Session::note_substitute_fallback(const std::string& why) {
  metrics().quarantine_fallbacks.fetch_add(1, std::memory_order_relaxed);
  // Someone took the function away (or its grants) since the capture found it: this database's
  // moves run inline from now on.
  if (why.find(capture::kMoveFunctionMissing) != std::string::npos) capture::note_move_function(outcome_database(), false);
  metrics().count_snapshot(SnapshotOutcome::not_quarantined);
  spdlog::warn("session {}: quarantine could not keep the table, the statement ran for real after its snapshot: {}",
               client_addr_, why);
  if (!ctx_.capture) return;
  capture::EventRecord ev;
  if (const capture::StatementContext* held = hold_.context()) ev.ctx = *held;
  ev.outcome = SnapshotOutcome::not_quarantined;
  ev.error = why;
  ctx_.capture->record_event(std::move(ev));
}

std::string Session::outcome_database() const {
  const capture::StatementContext* held = hold_.context();
  return held && !held->database.empty() ? held->database : database();
}

std::string Session::database() const {
  return params_.get("database").empty() ? params_.get("user") : params_.get("database");
}

void Session::confirm_outcomes() {
  if (!ctx_.capture) return pending_outcomes_.clear();
  ctx_.capture->confirm_outcomes(outcome_database(), std::move(pending_outcomes_));
  pending_outcomes_.clear();
}

}  // namespace predrop::proxy
