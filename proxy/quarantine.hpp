// The quarantine's substitute: a DROP TABLE / DROP SCHEMA a quarantine rule covers is replaced, on
// the client's own connection and in its own transaction, by one DO block that
//   1. runs the client's statement in a subtransaction and rolls it back: the server itself checks
//      it (missing table, dependents without CASCADE, owner, wrong kind, IF EXISTS) and sends its
//      own notices and errors, which reach the client less the context line the DO adds;
//   2. moves the tables into the quarantine schema instead (capture/quarantine_sql.hpp);
//   3. if the move cannot keep them, runs the client's statement for real (its answer was already
//      given) and tells predrop why in a warning the client never sees.
// The DO's CommandComplete becomes the statement's own tag. So the transaction, the answers and a
// ROLLBACK behave as the DROP would; the rows stay.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "capture/quarantine_sql.hpp"
#include "parser/parser.hpp"
#include "proxy/decoder.hpp"

namespace predrop::proxy {

// One statement of the client's text replaced by its substitute.
struct QuarantineStatement {
  size_t index = 0;                 // in the text's statements
  capture::QuarantineMove move;
  bool drop_schema = false;         // the real statement runs after the move (the schema's rest)
};

struct QuarantinePlan {
  std::vector<QuarantineStatement> statements;
  bool empty() const { return statements.empty(); }
};

// The client's statement text (its span of the source), or nullopt when the facts cannot say.
std::optional<std::string> statement_text(const parser::Facts& facts, size_t index);
// The DO block run in place of `text`.
std::string substitute_sql(std::string_view text, const QuarantineStatement& q);
// The whole new text of a Query whose statements `plan` substitutes, and what the client must see.
struct SubstitutedText {
  std::string sql;
  Substitutes substitutes;
};
std::optional<SubstitutedText> substitute_text(const parser::Facts& facts, const QuarantinePlan& plan);

}  // namespace predrop::proxy
