// The hold: a destructive statement waits here until every target's snapshot is written,
// the capture fails, or hold_timeout_ms passes. Fail open unless policy says closed.
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
  std::string m;
  for (char c : message) {
    if (c == '\'' || c == '\\') m += c;
    m += c;
  }
  std::string tag = "$predrop$";
  for (int n = 0; m.find(tag) != std::string::npos; ++n) tag = "$predrop" + std::to_string(n) + "$";
  return "DO " + tag + "BEGIN RAISE EXCEPTION USING ERRCODE = '" + std::string(sqlstate) + "', MESSAGE = E'" + m +
         "'; END" + tag;
}

void append_message(std::string& out, char type, std::string_view body) {
  char hdr[5];
  hdr[0] = type;
  wire::write_u32(hdr + 1, static_cast<uint32_t>(body.size() + 4));
  out.append(hdr, 5);
  out.append(body);
}

}  // namespace

capture::StatementContext Session::statement_context(const parser::Facts& facts) const {
  capture::StatementContext c;
  c.database = params_.get("database").empty() ? params_.get("user") : params_.get("database");
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
  if (facts->parse_error) return false;
  if (facts->unresolved()) {
    metrics().unresolved_statements.fetch_add(1);
    spdlog::warn("session {}: statement may destroy what no parser can see (fingerprint {}): relayed, recorded as unresolved",
                 client_addr_, facts->fingerprint);
    record_ledger(statement_context(*facts), SnapshotOutcome::unresolved);
  }
  return facts->destroys();
}

void Session::begin_hold(char type, std::shared_ptr<const parser::Facts> facts) {
  auto cfg = ctx_.config();
  hold_started_ = Clock::now();
  held_type_ = type;
  held_facts_ = facts;
  held_ctx_ = std::make_unique<capture::StatementContext>(statement_context(*facts));
  fail_closed_ = false;
  const std::string& db = held_ctx_->database;

  // Targets in statement order, each with the search_path in force at that point of the string.
  capture::SnapshotRequest req;
  req.ctx = *held_ctx_;
  parser::SearchPathTracker path = *search_path_;
  // Several statements in one Query run in one implicit transaction: SET LOCAL holds to its end.
  bool in_block = txn_status_ != 'I' || facts->statements.size() > 1;
  std::vector<std::pair<std::string, std::string>> skipped;  // schema, table
  for (const auto& st : facts->statements) {
    if (st.txn == parser::TxnControl::begin) in_block = true;
    if (st.search_path) path.apply(*st.search_path, in_block);
    if (st.temporary) continue;
    for (const auto& t : st.targets) {
      metrics().intercepted_by_kind[static_cast<size_t>(t.kind)].fetch_add(1);
      auto effective = path.effective(params_.get("user"));
      std::string schema_for_policy;
      policy::Decision decision;
      if (!t.relation.schema.empty() || t.kind == parser::DestroyKind::drop_schema) {
        schema_for_policy = t.relation.schema.empty() ? t.relation.name : t.relation.schema;
        decision = cfg->decide(db, schema_for_policy, t.relation.name, static_cast<int>(t.kind));
      } else {
        // Unqualified: the table's schema is known only once capture resolves it, so the first
        // schema of the path that a rule names decides ("$user" rarely exists; public usually does).
        schema_for_policy = effective.empty() ? std::string() : effective.front();
        decision = cfg->decide(db, schema_for_policy, t.relation.name, static_cast<int>(t.kind));
        for (const auto& candidate : effective) {
          auto d = cfg->decide(db, candidate, t.relation.name, static_cast<int>(t.kind));
          if (d.rule_index >= 0) {
            decision = d;
            schema_for_policy = candidate;
            break;
          }
        }
      }
      if (decision.action == policy::Action::skip) {
        skipped.emplace_back(schema_for_policy, t.relation.name);
        continue;
      }
      if (decision.on_failure == policy::OnFailure::closed) fail_closed_ = true;
      capture::TargetSpec spec;
      spec.kind = std::string(parser::to_string(t.kind));
      spec.schema = t.relation.schema;
      spec.name = t.relation.name;
      spec.roles = t.roles;
      req.targets.push_back(std::move(spec));
      if (req.search_path.empty()) req.search_path = effective;
    }
  }

  for (const auto& [schema, table] : skipped) {
    metrics().count_snapshot(SnapshotOutcome::policy_skip);
    record_ledger(*held_ctx_, SnapshotOutcome::policy_skip, schema, table);
  }

  bool disabled = !cfg->snapshots_enabled || !ctx_.capture;
  if (req.targets.empty() || disabled) {
    if (disabled && !req.targets.empty()) {
      metrics().count_snapshot(SnapshotOutcome::disabled);
      record_ledger(*held_ctx_, SnapshotOutcome::disabled);
    }
    // Nothing to wait for: relay at once (asynchronously, scan is mid-loop).
    holding_ = true;
    uint64_t id = ++hold_seq_;
    asio::post(executor(), [self = shared_from_this(), id]() {
      if (self->holding_ && self->hold_seq_ == id) self->release_hold(true, {}, {});
    });
    return;
  }

  holding_ = true;
  uint64_t id = ++hold_seq_;
  req.deadline = hold_started_ + std::chrono::milliseconds(cfg->hold_timeout_ms);
  // The capture service owns the deadline: at it, it answers "timeout" naming every target and
  // writes the ledger rows. This timer is only a backstop should that answer not arrive.
  hold_timer_ = std::make_unique<asio::steady_timer>(executor());
  hold_timer_->expires_at(req.deadline + std::chrono::milliseconds(50));
  std::weak_ptr<Session> weak = shared_from_this();
  hold_timer_->async_wait([weak, id](boost::system::error_code ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->on_hold_timeout(id);
  });
  auto exec = executor();
  ctx_.capture->snapshot(std::move(req), [weak, id, exec](capture::SnapshotResult result) {
    asio::post(exec, [weak, id, result = std::move(result)]() mutable {
      if (auto self = weak.lock()) self->on_capture_done(id, std::move(result));
    });
  });
}

void Session::on_capture_done(uint64_t hold_id, capture::SnapshotResult result) {
  if (!holding_ || hold_id != hold_seq_ || closed_) return;
  double hold_ms = ms_since(hold_started_);
  metrics().capture_duration.observe(result.capture_ms / 1000.0);
  for (const auto& t : result.tables) {
    metrics().count_snapshot(t.outcome);
    if (t.outcome == SnapshotOutcome::written && t.oid != 0) pending_outcomes_.push_back({t.oid, t.snapshot_id, t.event_id});
  }
  if (result.tables.empty()) metrics().count_snapshot(result.outcome);
  ctx_.capture->mark_hold(result.tables, hold_ms);
  if (result.ok() || !fail_closed_) {
    if (!result.ok())
      spdlog::warn("session {}: snapshot failed ({}: {}); statement relayed (fail open)", client_addr_, capture::to_string(result.outcome), result.error);
    return release_hold(true, {}, {});
  }
  std::string what;
  for (const auto& t : result.tables) {
    if (!what.empty()) what += ", ";
    what += t.schema + "." + t.table;
  }
  release_hold(false, "55000",
               "predrop: refused " + held_ctx_->statement_kind + (what.empty() ? "" : " of " + what) +
                   ": the snapshot could not be written (" + capture::to_string(result.outcome) + (result.error.empty() ? "" : ": " + result.error) + ")");
}

void Session::on_hold_timeout(uint64_t hold_id) {
  if (!holding_ || hold_id != hold_seq_ || closed_) return;
  metrics().count_snapshot(SnapshotOutcome::timeout);
  spdlog::warn("session {}: snapshot not written within {} ms; statement relayed{}", client_addr_,
               ctx_.config()->hold_timeout_ms, fail_closed_ ? " as an error (fail closed)" : " (fail open)");
  if (!fail_closed_) return release_hold(true, {}, {});
  release_hold(false, "55000",
               "predrop: refused " + held_ctx_->statement_kind + ": the snapshot was not written within " +
                   std::to_string(ctx_.config()->hold_timeout_ms) + " ms");
}

void Session::release_hold(bool proceed, std::string_view sqlstate, std::string message) {
  if (!holding_) return;
  holding_ = false;
  if (hold_timer_) hold_timer_->cancel();
  metrics().hold_duration.observe(ms_since(hold_started_) / 1000.0);
  Pipe& p = front_;
  p.held = false;
  if (proceed) {
    p.approved = true;
    if (held_type_ == 'Q') owed_.push_back('Q');
    if (held_facts_) apply_search_path(*held_facts_);
  } else {
    metrics().rejected_statements.fetch_add(1);
    // Replace the held message with one the server answers with our error.
    size_t total = wire::read_u32(p.buf.data() + p.scan + 1) + 1;
    remove_message(p, total);
    std::string sql = raise_sql(sqlstate, message);
    if (held_type_ == 'Q') {
      append_message(p.inject, 'Q', std::string_view(sql.c_str(), sql.size() + 1));
      owed_.push_back('Q');
    } else {
      // Extended protocol: run the raise through the unnamed statement and portal; the
      // ParseComplete/BindComplete it causes are swallowed, the error reaches the client
      // in place of the Execute's reply, and the server skips to the client's Sync.
      std::string parse;
      parse.push_back('\0');
      parse.append(sql);
      parse.push_back('\0');
      parse.append("\0\0", 2);
      append_message(p.inject, 'P', parse);
      append_message(p.inject, 'B', std::string_view("\0\0\0\0\0\0\0\0", 8));
      append_message(p.inject, 'E', std::string_view("\0\0\0\0\0", 5));
      owed_.push_back('p');
      owed_.push_back('b');
      statements_.erase("");
      portals_.erase("");
    }
  }
  held_facts_.reset();
  pump(p);
}

void Session::on_cancel_request(std::string packet, std::function<void()> done) {
  if (closed_) return done();
  if (holding_) {
    // The held statement never reached the server, so there is nothing there to cancel.
    spdlog::info("session {}: cancel request ended a hold; the statement was not relayed", client_addr_);
    release_hold(false, "57014", "canceling statement due to user request");
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

void Session::apply_search_path(const parser::Facts& facts) {
  if (!facts.touches_search_path() || !search_path_) return;
  bool in_block = txn_status_ != 'I' || facts.statements.size() > 1;
  for (const auto& st : facts.statements) {
    if (st.txn == parser::TxnControl::begin) in_block = true;
    if (st.search_path) search_path_->apply(*st.search_path, in_block);
    if (st.txn == parser::TxnControl::savepoint) search_path_->savepoint(st.savepoint);
    if (st.txn == parser::TxnControl::release) search_path_->release_savepoint(st.savepoint);
    if (st.txn == parser::TxnControl::rollback_to) search_path_->rollback_to_savepoint(st.savepoint);
    if (st.txn == parser::TxnControl::commit || st.txn == parser::TxnControl::rollback) {
      if (in_block && txn_status_ == 'I') search_path_->end_transaction(st.txn == parser::TxnControl::commit);
      in_block = false;
    }
  }
}

void Session::on_transaction_end(bool committed) {
  if (search_path_) search_path_->end_transaction(committed);
}

void Session::confirm_outcomes() {
  if (!ctx_.capture) return pending_outcomes_.clear();
  ctx_.capture->confirm_outcomes(held_ctx_ && !held_ctx_->database.empty() ? held_ctx_->database : params_.get("database"),
                                 std::move(pending_outcomes_));
  pending_outcomes_.clear();
}

}  // namespace predrop::proxy
