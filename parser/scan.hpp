// libpg_query's scanner as a token list, shared by the ledger's text redaction (classify.cpp)
// and the fallback for text the parser rejects (fallback.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace predrop::parser::detail {

struct Token {
  int token = 0;          // PgQuery__Token value (a keyword's own value, IDENT, SCONST, ';' …)
  int keyword_kind = 0;   // PgQuery__KeywordKind: 0 is no keyword
  size_t start = 0;       // byte offsets into the scanned text
  size_t end = 0;
};

// The session's standard_conforming_strings, for everything lexed on this thread while a scope
// lives (classify_uncached opens one). With it off, a backslash in '…' escapes the next byte, so
// `SELECT 'a\''; DROP TABLE t; --'` is a SELECT and a DROP to the server, and one SELECT to a
// lexer that assumes on. libpg_query's parser takes it as an option and its scanner from a
// thread-local of its own, which scan() sets from this.
class StringSyntaxScope {
 public:
  explicit StringSyntaxScope(bool standard_conforming_strings);
  ~StringSyntaxScope();
  StringSyntaxScope(const StringSyntaxScope&) = delete;
  StringSyntaxScope& operator=(const StringSyntaxScope&) = delete;

 private:
  bool previous_;
};
bool conforming_strings();
// pg_query_parse_opts / pg_query_fingerprint_opts options for conforming_strings().
int parser_options();

// Every token of text, comments included; nullopt when the scanner rejects the text (an
// unterminated literal, quoted identifier or comment), with *error_offset (when given) set to
// the byte offset the scanner reports the error at (the start of that literal), if it does.
std::optional<std::vector<Token>> scan(const std::string& text, std::optional<size_t>* error_offset = nullptr);

bool is_comment(const Token& t);
// SCONST, USCONST, BCONST, XCONST; with numbers also ICONST and FCONST.
bool is_literal(const Token& t, bool numbers);

// Comments dropped and literals replaced by $n (numbered after the highest $n already in the
// text). Used on pg_query_normalize's output (numbers = false: it replaced the constants it
// walks, and type modifiers such as varchar(10) stay readable) and, with numbers = true, on text
// the parser rejects. Text the scanner rejects is withheld whole.
std::string redact_literals(const std::string& text, bool numbers);

// Whether the pieces of text the classifier reports (destructive statements, unresolved risk,
// search_path changes) can be among these tokens: the prefilter's keywords, but as tokens, so a
// word inside a literal, a comment or a longer identifier does not count.
bool has_reportable_token(const std::string& text, const std::vector<Token>& tokens, size_t begin, size_t end);

}  // namespace predrop::parser::detail
