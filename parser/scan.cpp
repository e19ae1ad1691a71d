#include "parser/scan.hpp"

#include <pg_query.h>
#include <pg_query/pg_query.pb-c.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

// libpg_query's scanner reads this (each new scanner copies it); its
// parser sets it from the parse options and leaves it on.
extern "C" __thread bool standard_conforming_strings;

namespace predrop::parser::detail {

namespace {
thread_local bool t_conforming_strings = true;
}

StringSyntaxScope::StringSyntaxScope(bool on) : previous_(t_conforming_strings) { t_conforming_strings = on; }
StringSyntaxScope::~StringSyntaxScope() { t_conforming_strings = previous_; }
bool conforming_strings() { return t_conforming_strings; }
int parser_options() {
  return t_conforming_strings ? PG_QUERY_PARSE_DEFAULT : PG_QUERY_DISABLE_STANDARD_CONFORMING_STRINGS;
}

std::optional<std::vector<Token>> scan(const std::string& text, std::optional<size_t>* error_offset) {
  ::standard_conforming_strings = t_conforming_strings;
  PgQueryScanResult scanned = pg_query_scan(text.c_str());
  ::standard_conforming_strings = true;
  if (scanned.error) {
    // cursorpos counts characters from 1; the text is UTF-8 (continuation bytes are 10xxxxxx).
    if (error_offset && scanned.error->cursorpos > 0) {
      const size_t want = static_cast<size_t>(scanned.error->cursorpos - 1);
      size_t seen = 0, at = 0;
      for (; at < text.size(); ++at) {
        if ((static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) continue;
        if (seen++ == want) break;
      }
      *error_offset = at;
    }
    pg_query_free_scan_result(scanned);
    return std::nullopt;
  }
  PgQuery__ScanResult* result = pg_query__scan_result__unpack(nullptr, scanned.pbuf.len,
                                                              reinterpret_cast<const uint8_t*>(scanned.pbuf.data));
  pg_query_free_scan_result(scanned);
  if (!result) return std::nullopt;
  std::vector<Token> out;
  out.reserve(result->n_tokens);
  for (size_t i = 0; i < result->n_tokens; ++i) {
    const PgQuery__ScanToken* t = result->tokens[i];
    size_t start = static_cast<size_t>(std::max(0, t->start));
    size_t end = static_cast<size_t>(std::max(t->start, t->end));
    out.push_back(Token{static_cast<int>(t->token), static_cast<int>(t->keyword_kind), start, end});
  }
  pg_query__scan_result__free_unpacked(result, nullptr);
  // The scanner reports some literals (U&'…') with an empty extent: they run to the next token.
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].end > out[i].start) continue;
    size_t end = i + 1 < out.size() ? out[i + 1].start : text.size();
    while (end > out[i].start && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
    out[i].end = end;
  }
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].end > text.size() || (i > 0 && out[i].start < out[i - 1].end)) return std::nullopt;
  return out;
}

bool is_comment(const Token& t) {
  return t.token == PG_QUERY__TOKEN__SQL_COMMENT || t.token == PG_QUERY__TOKEN__C_COMMENT;
}

bool is_literal(const Token& t, bool numbers) {
  switch (t.token) {
    case PG_QUERY__TOKEN__SCONST:
    case PG_QUERY__TOKEN__USCONST:
    case PG_QUERY__TOKEN__BCONST:
    case PG_QUERY__TOKEN__XCONST:
      return true;
    case PG_QUERY__TOKEN__ICONST:
    case PG_QUERY__TOKEN__FCONST:
      return numbers;
    default:
      return false;
  }
}

// pg_query_normalize keeps comments, and the string literals of utility statements it does not
// walk (COMMENT ON … IS '…', CREATE SUBSCRIPTION … CONNECTION '…', OPTIONS (password '…')).
// The scanner finds both: comments are dropped, leftover literals become further $n.
std::string redact_literals(const std::string& text, bool numbers) {
  static const std::string kWithheld = "<statement text withheld: it could not be scanned for literals>";
  const auto tokens = scan(text);
  if (!tokens) return kWithheld;
  int next_param = 1;
  for (const Token& t : *tokens)
    if (t.token == PG_QUERY__TOKEN__PARAM && t.end > t.start + 1)
      next_param = std::max(next_param, std::atoi(text.c_str() + t.start + 1) + 1);
  std::string out;
  size_t copied = 0;
  for (const Token& t : *tokens) {
    const bool comment = is_comment(t);
    if (!comment && !is_literal(t, numbers)) continue;
    out.append(text, copied, t.start - copied);
    if (comment) {
      const bool glue = !out.empty() && !std::isspace(static_cast<unsigned char>(out.back())) && t.end < text.size() &&
                        !std::isspace(static_cast<unsigned char>(text[t.end]));
      if (glue) out += ' ';
    } else {
      out += "$" + std::to_string(next_param++);
    }
    copied = t.end;
  }
  out.append(text, copied, std::string::npos);
  while (!out.empty() && std::isspace(static_cast<unsigned char>(out.back()))) out.pop_back();
  size_t lead = 0;
  while (lead < out.size() && std::isspace(static_cast<unsigned char>(out[lead]))) ++lead;
  return out.substr(lead);
}

namespace {

bool ident_is(const std::string& text, const Token& t, std::string_view word) {
  if (t.token != PG_QUERY__TOKEN__IDENT || t.end - t.start != word.size()) return false;
  for (size_t i = 0; i < word.size(); ++i) {
    char c = text[t.start + i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != word[i]) return false;
  }
  return true;
}

}  // namespace

bool has_reportable_token(const std::string& text, const std::vector<Token>& tokens, size_t begin, size_t end) {
  for (size_t i = begin; i < end && i < tokens.size(); ++i) {
    const Token& t = tokens[i];
    switch (t.token) {
      case PG_QUERY__TOKEN__DROP:
      case PG_QUERY__TOKEN__ALTER:
      case PG_QUERY__TOKEN__TRUNCATE:
      case PG_QUERY__TOKEN__DISCARD:
      case PG_QUERY__TOKEN__EXECUTE:
      case PG_QUERY__TOKEN__CALL:
      case PG_QUERY__TOKEN__DO:
      case PG_QUERY__TOKEN__RESET:
      case PG_QUERY__TOKEN__SCHEMA:
      case PG_QUERY__TOKEN__UIDENT:
        return true;
      default:
        if (ident_is(text, t, "search_path") || ident_is(text, t, "set_config") || ident_is(text, t, "pg_settings"))
          return true;
    }
  }
  return false;
}

}  // namespace predrop::parser::detail
