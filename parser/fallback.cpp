// classify_fallback(): the facts of a text libpg_query's parser rejects, so that a statement of
// newer syntax (or a plain syntax error) never hides the DROPs around it.
//
// 1. The text is split into statements on its tokens, the way psql splits a script: at a ';'
//    outside parentheses and outside the BEGIN … END of a CREATE FUNCTION/PROCEDURE body
//    (BEGIN ATOMIC, with its CASE … END); empty statements are skipped, as the parser skips
//    them. pg_query_split_with_scanner does not know routine bodies, skips pieces without a
//    keyword (so "SELEC 1" would shift the indexes of the statements after it), and after an
//    unbalanced ')' counts no further statement: the rest of the text, DROPs included, would be
//    lost. Here a ')' never takes the depth below zero, and an unclosed '(' makes the rest of the
//    text one statement.
// 2. Each piece is parsed alone; what parses gives its facts as usual.
// 3. A piece that still does not parse is read from its tokens when it begins like a statement
//    the classifier targets: DROP TABLE / VIEW / MATERIALIZED VIEW / FOREIGN TABLE / SCHEMA /
//    OWNED BY with their name lists, TRUNCATE, ALTER TABLE / FOREIGN TABLE / MATERIALIZED VIEW /
//    VIEW with a DROP COLUMN, ALTER COLUMN … TYPE, RENAME or SET SCHEMA. Those name grammars
//    are small and the same in every server version: the facts are those the parser would give.
//    A tail after a complete name list (and its CASCADE/RESTRICT) does not stop the names
//    being held: no server runs such a statement, and holding costs only a snapshot.
// 4. A piece not read so, or whose tail holds any keyword the prefilter looks for (as a token,
//    not inside a literal or comment: `DROP TABLE a b, DROP TABLE c`, or statements an unclosed
//    '(' joined to it), is `unparsed`: the ledger gets a row with the fingerprint and the
//    normalised text. Anything else gives an empty statement.
// The text's fingerprint is then a hash of its tokens with the literals left out (pg_query_fingerprint
// needs a parse tree), and its normalised text has every literal and number replaced by $n.
// Text the scanner itself rejects (an unterminated literal or comment) is one statement, unparsed
// when the prefilter passes it; its normalised text is withheld.
#include "parser/classify_parts.hpp"
#include "parser/identifiers.hpp"
#include "parser/scan.hpp"

#include <pg_query.h>
#include <pg_query/pg_query.pb-c.h>

#include <cstdio>

namespace predrop::parser::detail {
namespace {

constexpr int kSemicolon = PG_QUERY__TOKEN__ASCII_59;
constexpr int kOpenParen = PG_QUERY__TOKEN__ASCII_40;
constexpr int kCloseParen = PG_QUERY__TOKEN__ASCII_41;
constexpr int kComma = PG_QUERY__TOKEN__ASCII_44;
constexpr int kDot = PG_QUERY__TOKEN__ASCII_46;
constexpr int kStar = PG_QUERY__TOKEN__ASCII_42;

struct Piece {
  size_t first = 0;  // token indexes, [first, last), the ';' left out
  size_t last = 0;
};

bool is_routine(const std::vector<Token>& code, size_t first, size_t last) {
  size_t i = first;
  auto at = [&](int token) { return i < last && code[i].token == token; };
  if (!at(PG_QUERY__TOKEN__CREATE)) return false;
  ++i;
  if (at(PG_QUERY__TOKEN__OR)) {
    ++i;
    if (!at(PG_QUERY__TOKEN__REPLACE)) return false;
    ++i;
  }
  return at(PG_QUERY__TOKEN__FUNCTION) || at(PG_QUERY__TOKEN__PROCEDURE);
}

std::vector<Piece> split(const std::vector<Token>& code) {
  std::vector<Piece> pieces;
  size_t first = 0, parens = 0, begins = 0;
  bool routine = false;
  for (size_t i = 0; i < code.size(); ++i) {
    const int tok = code[i].token;
    if (i == first) routine = is_routine(code, first, code.size());
    if (tok == kOpenParen) ++parens;
    else if (tok == kCloseParen && parens > 0) --parens;
    else if (routine && (tok == PG_QUERY__TOKEN__BEGIN_P || tok == PG_QUERY__TOKEN__CASE)) ++begins;
    else if (routine && tok == PG_QUERY__TOKEN__END_P && begins > 0) --begins;
    else if (tok == kSemicolon && parens == 0 && begins == 0) {
      if (i > first) pieces.push_back({first, i});
      first = i + 1;
    }
  }
  if (first < code.size()) pieces.push_back({first, code.size()});
  return pieces;
}

// Reads the tokens of one statement the parser rejected, as the grammar would.
class TokenReader {
 public:
  TokenReader(const std::string& sql, const std::vector<Token>& code, Piece piece)
      : sql_(sql), code_(code), i_(piece.first), last_(piece.last) {}

  // The statement's facts, or nullopt when it is none of the forms read here or its names
  // cannot be read.
  std::optional<Statement> read() {
    if (accept(PG_QUERY__TOKEN__DROP)) return drop();
    if (accept(PG_QUERY__TOKEN__TRUNCATE)) return truncate();
    if (accept(PG_QUERY__TOKEN__ALTER)) return alter();
    return std::nullopt;
  }
  // The first token read() did not consume: the tail after a complete name list.
  size_t stopped_at() const { return i_; }

 private:
  bool at(int token, size_t ahead = 0) const { return i_ + ahead < last_ && code_[i_ + ahead].token == token; }
  bool accept(int token) {
    if (!at(token)) return false;
    ++i_;
    return true;
  }
  bool accept(int a, int b) {
    if (!at(a) || !at(b, 1)) return false;
    i_ += 2;
    return true;
  }
  std::string_view text_of(const Token& t) const { return std::string_view(sql_).substr(t.start, t.end - t.start); }

  // ColId (IDENT, unreserved and column-name keywords) or, after a dot, ColLabel (any keyword),
  // as the server stores it: unquoted folded, quoted kept, both cut to 63 bytes.
  std::optional<std::string> identifier(bool any_keyword) {
    if (i_ >= last_) return std::nullopt;
    const Token& t = code_[i_];
    std::string_view raw = text_of(t);
    std::string name;
    if (t.token == PG_QUERY__TOKEN__IDENT) {
      if (!raw.empty() && raw.front() == '"') {
        if (raw.size() < 3 || raw.back() != '"') return std::nullopt;
        for (size_t k = 1; k + 1 < raw.size(); ++k) {
          name.push_back(raw[k]);
          if (raw[k] == '"') ++k;  // "" is one quote
        }
      } else {
        name = fold_identifier(raw);
      }
    } else if (t.keyword_kind == PG_QUERY__KEYWORD_KIND__UNRESERVED_KEYWORD ||
               t.keyword_kind == PG_QUERY__KEYWORD_KIND__COL_NAME_KEYWORD ||
               (any_keyword && t.keyword_kind != PG_QUERY__KEYWORD_KIND__NO_KEYWORD)) {
      name = fold_identifier(raw);
    } else {
      return std::nullopt;  // a reserved word, a literal, U&"…", punctuation
    }
    name = truncate_identifier(std::move(name));
    if (name.empty()) return std::nullopt;  // only invalid UTF-8 cuts to nothing; the server rejects it
    ++i_;
    return name;
  }

  // [catalog.]schema.name; the catalog part is ignored, as the parse-tree walk ignores it.
  std::optional<RelationName> qualified_name() {
    std::vector<std::string> parts;
    auto first = identifier(false);
    if (!first) return std::nullopt;
    parts.push_back(std::move(*first));
    while (accept(kDot)) {
      auto next = identifier(true);
      if (!next) return std::nullopt;
      parts.push_back(std::move(*next));
    }
    if (parts.size() > 3) return std::nullopt;  // the server rejects it: too many dotted names
    RelationName out;
    out.name = parts.back();
    if (parts.size() >= 2) out.schema = parts[parts.size() - 2];
    return out;
  }

  // relation_expr of TRUNCATE and ALTER TABLE: name, name *, ONLY name, ONLY (name).
  std::optional<RelationName> relation_expr() {
    if (accept(PG_QUERY__TOKEN__ONLY)) {
      if (accept(kOpenParen)) {
        auto name = qualified_name();
        if (!name || !accept(kCloseParen)) return std::nullopt;
        return name;
      }
      return qualified_name();
    }
    auto name = qualified_name();
    if (name) accept(kStar);
    return name;
  }

  // Adds a target unless it names a temporary schema's relation (ignored by design).
  Target* add(Statement& st, DestroyKind kind, RelationName name) {
    const std::string& schema = kind == DestroyKind::drop_schema ? name.name : name.schema;
    if (!schema.empty() && is_temp_schema(schema)) {
      ++temporary_;
      return nullptr;
    }
    Target t;
    t.kind = kind;
    t.relation = std::move(name);
    st.targets.push_back(std::move(t));
    return &st.targets.back();
  }

  std::optional<Statement> finish(Statement st) const {
    if (st.targets.empty() && temporary_ > 0) st.temporary = true;
    return st;
  }

  bool behavior_cascade() {
    if (accept(PG_QUERY__TOKEN__CASCADE)) return true;
    accept(PG_QUERY__TOKEN__RESTRICT);
    return false;
  }

  std::optional<Statement> drop() {
    std::optional<DestroyKind> kind;
    if (accept(PG_QUERY__TOKEN__TABLE)) kind = DestroyKind::drop_table;
    else if (accept(PG_QUERY__TOKEN__VIEW)) kind = DestroyKind::drop_view;
    else if (accept(PG_QUERY__TOKEN__MATERIALIZED, PG_QUERY__TOKEN__VIEW)) kind = DestroyKind::drop_matview;
    else if (accept(PG_QUERY__TOKEN__FOREIGN, PG_QUERY__TOKEN__TABLE)) kind = DestroyKind::drop_foreign_table;
    else if (accept(PG_QUERY__TOKEN__SCHEMA)) kind = DestroyKind::drop_schema;
    else if (accept(PG_QUERY__TOKEN__OWNED, PG_QUERY__TOKEN__BY)) return drop_owned();
    if (!kind) return std::nullopt;
    const bool if_exists = accept(PG_QUERY__TOKEN__IF_P, PG_QUERY__TOKEN__EXISTS);
    std::vector<RelationName> names;
    do {
      std::optional<RelationName> name;
      if (*kind == DestroyKind::drop_schema) {  // schema names are never qualified
        if (auto id = identifier(false); id && !at(kDot)) name = RelationName{"", std::move(*id)};
      } else {
        name = qualified_name();
      }
      if (!name) return std::nullopt;
      names.push_back(std::move(*name));
    } while (accept(kComma));
    const bool cascade = behavior_cascade();
    Statement st;
    for (auto& name : names)
      if (Target* t = add(st, *kind, std::move(name))) {
        t->if_exists = if_exists;
        t->cascade = cascade;
      }
    return finish(std::move(st));
  }

  std::optional<Statement> drop_owned() {
    Target t;
    t.kind = DestroyKind::drop_owned;
    do {
      if (accept(PG_QUERY__TOKEN__CURRENT_USER)) t.roles.push_back("CURRENT_USER");
      else if (accept(PG_QUERY__TOKEN__SESSION_USER)) t.roles.push_back("SESSION_USER");
      else if (accept(PG_QUERY__TOKEN__CURRENT_ROLE)) t.roles.push_back("CURRENT_ROLE");
      else {
        const bool quoted = i_ < last_ && text_of(code_[i_]).starts_with('"');
        const bool type_func = i_ < last_ && code_[i_].keyword_kind == PG_QUERY__KEYWORD_KIND__TYPE_FUNC_NAME_KEYWORD;
        auto role = type_func ? std::optional<std::string>(fold_identifier(text_of(code_[i_++]))) : identifier(false);
        if (!role) return std::nullopt;
        if (!quoted && *role == "public") t.roles.push_back("PUBLIC");
        else if (!quoted && *role == "none") return std::nullopt;  // reserved: the server rejects it
        else t.roles.push_back(std::move(*role));
      }
    } while (accept(kComma));
    t.cascade = behavior_cascade();
    Statement st;
    st.targets.push_back(std::move(t));
    return st;
  }

  std::optional<Statement> truncate() {
    accept(PG_QUERY__TOKEN__TABLE);
    std::vector<RelationName> names;
    do {
      auto name = relation_expr();
      if (!name) return std::nullopt;
      names.push_back(std::move(*name));
    } while (accept(kComma));
    if (!accept(PG_QUERY__TOKEN__RESTART, PG_QUERY__TOKEN__IDENTITY_P))
      accept(PG_QUERY__TOKEN__CONTINUE_P, PG_QUERY__TOKEN__IDENTITY_P);
    const bool cascade = behavior_cascade();
    Statement st;
    for (auto& name : names)
      if (Target* t = add(st, DestroyKind::truncate, std::move(name))) t->cascade = cascade;
    return finish(std::move(st));
  }

  // ALTER TABLE / FOREIGN TABLE / MATERIALIZED VIEW / VIEW: a target when a subcommand the
  // parse-tree walk reports (DROP COLUMN, ALTER COLUMN … TYPE, RENAME, SET SCHEMA) can be read.
  // Without one the statement is not read: it is unparsed, since which subcommand failed to
  // parse is unknown.
  std::optional<Statement> alter() {
    if (!accept(PG_QUERY__TOKEN__TABLE) && !accept(PG_QUERY__TOKEN__VIEW) &&
        !accept(PG_QUERY__TOKEN__FOREIGN, PG_QUERY__TOKEN__TABLE) &&
        !accept(PG_QUERY__TOKEN__MATERIALIZED, PG_QUERY__TOKEN__VIEW))
      return std::nullopt;
    const bool if_exists = accept(PG_QUERY__TOKEN__IF_P, PG_QUERY__TOKEN__EXISTS);
    auto name = relation_expr();
    if (!name) return std::nullopt;
    std::string actions;
    bool cascade = false;
    if (accept(PG_QUERY__TOKEN__RENAME)) {
      if (accept(PG_QUERY__TOKEN__TO)) {
        auto to = identifier(false);
        if (!to) return std::nullopt;
        actions = "RENAME TO " + *to;
      } else {
        if (at(PG_QUERY__TOKEN__CONSTRAINT)) return std::nullopt;
        accept(PG_QUERY__TOKEN__COLUMN);
        auto from = identifier(false);
        if (!from || !accept(PG_QUERY__TOKEN__TO)) return std::nullopt;
        auto to = identifier(false);
        if (!to) return std::nullopt;
        actions = "RENAME COLUMN " + *from + " TO " + *to;
      }
    } else if (accept(PG_QUERY__TOKEN__SET, PG_QUERY__TOKEN__SCHEMA)) {
      auto schema = identifier(false);
      if (!schema) return std::nullopt;
      actions = "SET SCHEMA " + *schema;
    } else {
      while (i_ < last_) {
        std::string action;
        if (accept(PG_QUERY__TOKEN__DROP) && !at(PG_QUERY__TOKEN__CONSTRAINT)) {
          accept(PG_QUERY__TOKEN__COLUMN);
          accept(PG_QUERY__TOKEN__IF_P, PG_QUERY__TOKEN__EXISTS);
          if (auto column = identifier(false)) action = "DROP COLUMN " + *column;
        } else if (accept(PG_QUERY__TOKEN__ALTER) && !at(PG_QUERY__TOKEN__CONSTRAINT)) {
          accept(PG_QUERY__TOKEN__COLUMN);
          auto column = identifier(false);
          if (column && (accept(PG_QUERY__TOKEN__TYPE_P) || (accept(PG_QUERY__TOKEN__SET, PG_QUERY__TOKEN__DATA_P) &&
                                                             accept(PG_QUERY__TOKEN__TYPE_P))))
            action = "ALTER COLUMN " + *column + " TYPE";
        }
        // The rest of the subcommand, to the next comma outside parentheses.
        size_t parens = 0;
        for (; i_ < last_; ++i_) {
          const int tok = code_[i_].token;
          if (tok == kOpenParen) ++parens;
          else if (tok == kCloseParen && parens > 0) --parens;
          else if (tok == kComma && parens == 0) break;
          else if (tok == PG_QUERY__TOKEN__CASCADE && parens == 0 && !action.empty()) cascade = true;
        }
        accept(kComma);
        if (action.empty()) continue;
        if (!actions.empty()) actions += ", ";
        actions += action;
      }
    }
    if (actions.empty()) return std::nullopt;
    Statement st;
    if (Target* t = add(st, DestroyKind::alter_table, std::move(*name))) {
      t->if_exists = if_exists;
      t->cascade = cascade;
      t->action = std::move(actions);
    }
    return finish(std::move(st));
  }

  const std::string& sql_;
  const std::vector<Token>& code_;
  size_t i_;
  const size_t last_;
  int temporary_ = 0;
};

// FNV-1a over each token's kind and, for words, its text (unquoted words folded); literals
// contribute their kind only, so texts that differ in constants share a fingerprint, as with
// pg_query_fingerprint.
std::string token_fingerprint(const std::string& sql, const std::vector<Token>& code) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](unsigned char byte) {
    h ^= byte;
    h *= 0x100000001b3ull;
  };
  for (const Token& t : code) {
    for (int shift = 0; shift < 32; shift += 8) mix(static_cast<unsigned char>(t.token >> shift));
    if (is_literal(t, true) || t.token == PG_QUERY__TOKEN__PARAM) continue;
    const bool quoted = t.end > t.start && sql[t.start] == '"';
    for (size_t k = t.start; k < t.end; ++k) {
      char c = sql[k];
      if (!quoted && c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      mix(static_cast<unsigned char>(c));
    }
    mix(0);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

}  // namespace

Facts classify_fallback(const std::string& sql, std::string parse_error, bool shape_changes) {
  Facts facts;
  facts.parse_error = true;
  facts.error_message = std::move(parse_error);
  facts.normalized = redact_literals(sql, true);
  std::optional<size_t> error_at;
  auto tokens = scan(sql, &error_at);
  if (!tokens) {
    Statement st;
    st.unparsed = may_matter(sql);
    facts.statements.push_back(st);
    if (st.unparsed) {
      // The tokens before the literal the scanner cannot end: its content (a password, say) must
      // not go into a hash that could be tested against guesses.
      std::vector<Token> before;
      if (error_at && *error_at <= sql.size())
        if (auto prefix = scan(sql.substr(0, *error_at)))
          for (const Token& t : *prefix)
            if (!is_comment(t)) before.push_back(t);
      before.push_back(Token{0, 0, 0, 0});  // marks the unscannable rest, so the hash is never of nothing
      facts.fingerprint = token_fingerprint(sql, before);
    }
    return facts;
  }
  std::vector<Token> code;
  code.reserve(tokens->size());
  for (const Token& t : *tokens)
    if (!is_comment(t)) code.push_back(t);

  for (const Piece& piece : split(code)) {
    const size_t start = code[piece.first].start;
    const std::string text = sql.substr(start, code[piece.last - 1].end - start);
    if (!parse_statements(text, facts.statements, shape_changes)) continue;
    Statement st;
    TokenReader reader(sql, code, piece);
    size_t unread = piece.first;
    if (auto read = reader.read()) {
      st = std::move(*read);
      unread = reader.stopped_at();
      // A ';' inside the piece (an unclosed '(' or routine body kept it whole) ends what was
      // read: the statements after it are not this one's tail.
      for (size_t k = piece.first; k < unread; ++k)
        if (code[k].token == kSemicolon) unread = k;
    }
    // The prefilter is what the proxy asks first: a keyword token it would not pass (DO right
    // after a '$', which no valid statement has) cannot reach the proxy either.
    st.unparsed = has_reportable_token(sql, code, unread, piece.last) && may_matter(sql);
    facts.statements.push_back(std::move(st));
  }
  if (facts.recorded()) facts.fingerprint = token_fingerprint(sql, code);
  return facts;
}

}  // namespace predrop::parser::detail
