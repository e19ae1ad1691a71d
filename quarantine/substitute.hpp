// The quarantine's substitute: a DROP TABLE / DROP SCHEMA a quarantine rule covers is replaced, on
// the client's own connection and in its own transaction, by one DO block that
//   1. runs the client's statement in a subtransaction and rolls it back: the server itself checks
//      it (missing table, dependents without CASCADE, owner, wrong kind, IF EXISTS) and sends its
//      own notices and errors, which reach the client less the context line the DO adds;
//   2. moves the tables into the quarantine schema instead (quarantine/move_sql.hpp);
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

#include "quarantine/move_sql.hpp"
#include "parser/parser.hpp"

namespace predrop::quarantine {

// A statement predrop runs in the client's place (a quarantine's substitute, below):
// its replies are the client's, less what the substitute itself adds.
struct Substitute {
  uint16_t index = 0;   // which statement of the owed entry's text (an Execute's: 0)
  std::string tag;      // the CommandComplete tag the client gets instead of "DO"
  std::string text;     // the client's statement, as the substitute EXECUTEs it
};
using Substitutes = std::vector<Substitute>;
// SQLSTATE of the warning a substitute raises for predrop alone (swallowed): it could not keep the
// table and ran the statement for real; the message says why.
inline constexpr std::string_view kSubstituteWarningState = "PQ001";
// The error the substitute raises to roll back its trial of the client's statement (never sent:
// the block catches it at once).
inline constexpr std::string_view kSubstituteTrialState = "PQ000";

// One statement of the client's text replaced by its substitute.
struct QuarantineStatement {
  size_t index = 0;                 // in the text's statements
  QuarantineMove move;
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

}  // namespace predrop::quarantine
