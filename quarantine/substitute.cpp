#include "quarantine/substitute.hpp"

#include <algorithm>

namespace predrop::quarantine {

namespace {

// A dollar-quote tag that occurs in none of the texts it will enclose or sit beside.
std::string dollar_tag(std::string_view stem, std::initializer_list<std::string_view> texts) {
  for (int n = 0;; ++n) {
    std::string tag = "$" + std::string(stem) + (n ? std::to_string(n) : "") + "$";
    if (std::none_of(texts.begin(), texts.end(), [&](std::string_view t) { return t.find(tag) != std::string_view::npos; }))
      return tag;
  }
}

}  // namespace

std::optional<std::string> statement_text(const parser::Facts& facts, size_t index) {
  if (index >= facts.statements.size() || facts.source.empty() || facts.parse_error) return std::nullopt;
  const parser::Statement& st = facts.statements[index];
  if (!st.has_span || size_t{st.text_begin} + st.text_length > facts.source.size()) return std::nullopt;
  return facts.source.substr(st.text_begin, st.text_length);
}

std::string substitute_sql(std::string_view text, const QuarantineStatement& q) {
  // Via the installed function the move is a few statements of this block; inline it is a DO block
  // of its own, run by EXECUTE.
  const bool call = q.move.via_function;
  const std::string move = call ? move_statements(q.move) : move_sql(q.move);
  const std::string s = dollar_tag("predrop_s", {text, move});
  const std::string m = dollar_tag("predrop_m", {text, move, s});
  std::string stmt = s + std::string(text) + s;
  std::string quoted_move = m + move + m;
  const std::string outer = dollar_tag("predrop_q", {text, move, stmt, quoted_move});
  // predrop_messages keeps the session's client_min_messages: the move's own notices (a view it
  // drops cascading) and the fallback's repeat of the statement are not the client's to see.
  std::string sql;
  sql.reserve(1024 + 3 * text.size() + move.size());
  sql += "DO " + outer + "\nDECLARE predrop_messages text := pg_catalog.current_setting('client_min_messages');\nBEGIN\n";
  const std::string trial_state(kSubstituteTrialState);
  sql += "  BEGIN\n    EXECUTE " + stmt + ";\n    RAISE EXCEPTION USING ERRCODE = '" + trial_state + "';\n";
  sql += "  EXCEPTION WHEN SQLSTATE '" + trial_state + "' THEN NULL;\n  END;\n";
  sql += "  PERFORM pg_catalog.set_config('client_min_messages', 'error', true);\n";
  sql += "  BEGIN\n";
  sql += call ? move : "    EXECUTE " + quoted_move + ";\n";
  if (q.drop_schema) sql += "    EXECUTE " + stmt + ";\n";
  sql += "  EXCEPTION WHEN OTHERS THEN\n";
  sql += "    PERFORM pg_catalog.set_config('client_min_messages', 'warning', true);\n";
  sql += "    RAISE WARNING USING ERRCODE = '" + std::string(kSubstituteWarningState) + "', MESSAGE = SQLERRM;\n";
  sql += "    PERFORM pg_catalog.set_config('client_min_messages', 'error', true);\n";
  sql += "    EXECUTE " + stmt + ";\n  END;\n";
  sql += "  PERFORM pg_catalog.set_config('client_min_messages', predrop_messages, true);\nEND\n" + outer;
  return sql;
}

std::optional<SubstitutedText> substitute_text(const parser::Facts& facts, const QuarantinePlan& plan) {
  SubstitutedText out;
  out.sql = facts.source;
  std::vector<const QuarantineStatement*> order;
  for (const auto& q : plan.statements) order.push_back(&q);
  // From the last statement back, so that earlier spans keep their offsets.
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->index > b->index; });
  for (const QuarantineStatement* q : order) {
    auto text = statement_text(facts, q->index);
    if (!text || q->index > 0xFFFF) return std::nullopt;
    const parser::Statement& st = facts.statements[q->index];
    out.sql.replace(st.text_begin, st.text_length, substitute_sql(*text, *q));
    out.substitutes.push_back({static_cast<uint16_t>(q->index), q->drop_schema ? "DROP SCHEMA" : "DROP TABLE",
                               std::move(*text)});
  }
  std::reverse(out.substitutes.begin(), out.substitutes.end());
  return out;
}

}  // namespace predrop::quarantine
