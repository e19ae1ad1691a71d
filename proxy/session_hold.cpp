// The session's side of a hold (proxy/hold.hpp): which judged statements wait, what a hold needs
// of the session (its HoldHost side), applying a hold's ending to the pipes, and the outcome checks
// the session hands to the capture at its transaction's end.
#include <spdlog/spdlog.h>

#include "proxy/hold.hpp"
#include "proxy/metrics.hpp"
#include "proxy/session.hpp"

namespace predrop::proxy {

asio::any_io_executor Session::hold_executor() { return executor(); }

std::weak_ptr<void> Session::hold_lifetime() { return weak_from_this(); }

// The hold's ending applied to the held message, whole in the front buffer at scan: relayed as it
// is, dropped with the stand-in's bytes sent in its place, or dropped with the session.
void Session::hold_ended(HoldEnd end) {
  Pipe& p = front_;
  decoder_->note_held(std::move(end.captured));
  decoder_->note_outcome_checks(std::move(end.outcome_checks));
  if (end.ending == HoldEnding::client_left) return close("client left during a hold");
  if (end.stand_in) {
    p.discard = hold_.held_bytes();
    p.inject += end.stand_in->bytes;
    decoder_->stand_in_for_last(*end.stand_in);
  } else {
    p.scan += hold_.held_bytes();
  }
  pump(p);
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
    record_intercepted(ctx_.hold_capture.get(), statement_context(*facts), SnapshotOutcome::unparsed);
  }
  if (facts->unresolved()) {
    metrics().unresolved_statements.fetch_add(1);
    spdlog::warn("session {}: statement may destroy what no parser can see (fingerprint {}): relayed, recorded as unresolved",
                 client_addr_, facts->fingerprint);
    record_intercepted(ctx_.hold_capture.get(), statement_context(*facts), SnapshotOutcome::unresolved);
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
  in.checks_awaiting_end = decoder_->transactions().outcome_check_count();
  in.tracks_shape_changes = decoder_->tracks_shape_changes();
  in.facts = std::move(facts);
  hold_.begin(std::move(in), ctx_.config(), ctx_.hold_capture.get());
}

void Session::on_cancel_request(std::string packet, std::function<void()> done) {
  if (state_.closed()) return done();
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
  if (why.find(quarantine::kMoveFunctionMissing) != std::string::npos) quarantine::note_move_function(outcome_database(), false);
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
  auto outcomes = decoder_->transactions().take_outcome_checks();
  if (!ctx_.capture) return;
  after_reply_.push_back([this, database = outcome_database(), outcomes = std::move(outcomes)]() mutable {
    ctx_.capture->confirm_outcomes(std::move(database), std::move(outcomes));
  });
}

void Session::run_after_reply() {
  if (after_reply_.empty()) return;
  auto due = std::move(after_reply_);
  after_reply_.clear();
  for (auto& work : due) work();
}

}  // namespace predrop::proxy
