// may_matter(): the hot-path prefilter. Every statement the proxy relays goes through it, so it
// is one pass over the bytes with no allocation; only texts that pass are parsed.
//
// Soundness argument. The classifier reports something only for statements that the server
// lexes from one of these keywords (case-insensitive, ASCII letters only — the lexer never
// produces a keyword from anything else):
//   drop, alter, truncate   destructive DDL (DROP …, ALTER TABLE/VIEW …, TRUNCATE)
//   discard                 DISCARD ALL resets search_path
//   execute, call, do       unresolved risk (EXECUTE may also appear as EXPLAIN/CREATE TABLE AS EXECUTE)
//   search_path, schema     SET/RESET search_path, SET SCHEMA 'x' (an alias of search_path)
//   reset                   RESET ALL
//   set_config              set_config('search_path' | 'role' | 'session_authorization', …), also
//                           with $n parameters
//   role, authorization     SET ROLE, RESET ROLE, SET / RESET SESSION AUTHORIZATION: whom "$user"
//                           on the path names. "role" is a substring of many identifiers (roles,
//                           user_role…), so like "do" it is matched as a whole word: the lexer
//                           makes the ROLE token (or the identifier role, quoted or not) only
//                           from those four letters between non-identifier bytes.
//   pg_settings             UPDATE pg_settings SET setting = … (a rule that calls set_config)
//   u&                      a Unicode-escaped identifier (U&"search\005fpath") could spell any
//                           GUC name without the ASCII letters; it is rare, so any U& passes.
// Plain substring matching over the whole text is sound: a keyword inside a string, a comment or
// a longer identifier only costs a needless parse. Transaction statements alone (BEGIN, COMMIT,
// SAVEPOINT …) are deliberately not keywords: they matter only with a search_path change, which
// the proxy also learns from CommandComplete tags; when they share a message with one of the
// keywords above they are parsed and reported as usual.
//
// "do" is a substring of many words (double, done, index_do…), so it alone is matched as a whole
// word: a DO statement begins with the DO token, which the lexer ends at the first byte that
// cannot continue an identifier ([A-Za-z0-9_$] or any byte >= 0x80; "DO$$" is one identifier
// and a syntax error), and which is preceded by the start of text, whitespace, ';' or the end of
// a comment — never by an identifier byte.
//
// With shape_changes the classifier also reports shape changes and all transaction control;
// those statements are lexed from these keywords as well:
//   create                  CREATE TABLE / FOREIGN TABLE / TABLE AS / MATERIALIZED VIEW / SCHEMA … CREATE TABLE
//   refresh                 REFRESH MATERIALIZED VIEW
//   alter                   ALTER … ADD/DROP/ALTER COLUMN, RENAME, SET SCHEMA (already a keyword)
//   select + into           SELECT … INTO t, also under WITH or EXPLAIN ANALYZE: the text passes
//                           only when it holds both, anywhere, so INSERT INTO … VALUES stays out
//   savepoint, rollback,    the transaction control that decides whether a change commits:
//   release, prepare        ROLLBACK [TO], RELEASE, PREPARE TRANSACTION, COMMIT/ROLLBACK PREPARED
// BEGIN and COMMIT alone stay out: ReadyForQuery tells the proxy a transaction committed. The
// shape keywords have their own candidate pairs, so that a default call does not check them.
#include "parser/parser.hpp"

#include <cstddef>
#include <cstdint>

namespace predrop::parser {
namespace {

inline bool is_ident_byte(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '$' || c >= 0x80;
}

// The len bytes at p[i] are not part of a longer identifier (the lexer ends a keyword there).
inline bool whole_word(const unsigned char* p, size_t i, size_t n, size_t len) {
  return (i == 0 || !is_ident_byte(p[i - 1])) && (i + len == n || !is_ident_byte(p[i + len]));
}

// pattern is lower case; letters compare case-insensitively, other bytes exactly.
template <size_t N>
inline bool matches_at(const unsigned char* p, size_t remaining, const char (&pattern)[N]) {
  constexpr size_t len = N - 1;
  if (remaining < len) return false;
  for (size_t k = 1; k < len; ++k) {  // k = 0 was checked by the caller's switch
    const unsigned char want = static_cast<unsigned char>(pattern[k]);
    unsigned char c = p[k];
    if (want >= 'a' && want <= 'z') c |= 0x20;
    if (c != want) return false;
  }
  return true;
}

// Every keyword is at least two bytes long, so a keyword can only start where the two bytes,
// both |0x20, form one of these pairs. The 8 KiB bitset turns the common case (no candidate)
// into one table lookup per byte; the full comparison runs only on a candidate.
struct PairSet {
  uint64_t bits[1024] = {};
  constexpr void add(const char* pair) {
    const unsigned key = (static_cast<unsigned char>(pair[0]) | 0x20u) << 8 |
                         (static_cast<unsigned char>(pair[1]) | 0x20u);
    bits[key >> 6] |= uint64_t{1} << (key & 63);
  }
  constexpr explicit PairSet(bool shape_changes) {
    for (const char* pair : {"dr", "di", "do", "al", "au", "tr", "ex", "ca", "se", "sc", "re", "ro", "pg", "u&"})
      add(pair);
    if (shape_changes)
      for (const char* pair : {"cr", "in", "sa", "pr"}) add(pair);
  }
  bool has(unsigned char a, unsigned char b) const {
    const unsigned key = (a | 0x20u) << 8 | (b | 0x20u);
    return (bits[key >> 6] >> (key & 63)) & 1;
  }
};
constexpr PairSet kCandidatePairs(false);
constexpr PairSet kShapeCandidatePairs(true);

template <bool kShape>
bool scan(std::string_view sql) {
  constexpr const PairSet& pairs = kShape ? kShapeCandidatePairs : kCandidatePairs;
  const auto* p = reinterpret_cast<const unsigned char*>(sql.data());
  const size_t n = sql.size();
  [[maybe_unused]] bool seen_select = false, seen_into = false;
  for (size_t i = 0; i + 1 < n; ++i) {
    if (!pairs.has(p[i], p[i + 1])) [[likely]]
      continue;
    const unsigned char* at = p + i;
    const size_t rest = n - i;
    // |0x20 maps 'A'..'Z' onto 'a'..'z'; the only other byte reaching a letter's value is that
    // letter itself, so the switch sees exactly the case-insensitive first letters.
    switch (*at | 0x20) {
      case 'd':
        if (matches_at(at, rest, "drop") || matches_at(at, rest, "discard")) return true;
        if (matches_at(at, rest, "do") && whole_word(p, i, n, 2)) return true;
        break;
      case 'a':
        if (matches_at(at, rest, "alter") || matches_at(at, rest, "authorization")) return true;
        break;
      case 't':
        if (matches_at(at, rest, "truncate")) return true;
        break;
      case 'e':
        if (matches_at(at, rest, "execute")) return true;
        break;
      case 'c':
        if (matches_at(at, rest, "call")) return true;
        if constexpr (kShape)
          if (matches_at(at, rest, "create")) return true;
        break;
      case 's':
        if (matches_at(at, rest, "search_path") || matches_at(at, rest, "schema") ||
            matches_at(at, rest, "set_config"))
          return true;
        if constexpr (kShape) {
          if (matches_at(at, rest, "savepoint")) return true;
          if (matches_at(at, rest, "select")) {
            if (seen_into) return true;
            seen_select = true;
          }
        }
        break;
      case 'r':
        if (matches_at(at, rest, "reset")) return true;
        if (matches_at(at, rest, "role") && whole_word(p, i, n, 4)) return true;
        if constexpr (kShape)
          if (matches_at(at, rest, "refresh") || matches_at(at, rest, "rollback") ||
              matches_at(at, rest, "release"))
            return true;
        break;
      case 'p':
        if (matches_at(at, rest, "pg_settings")) return true;
        if constexpr (kShape)
          if (matches_at(at, rest, "prepare")) return true;
        break;
      case 'i':
        if constexpr (kShape)
          if (matches_at(at, rest, "into")) {
            if (seen_select) return true;
            seen_into = true;
          }
        break;
      case 'u':
        if (matches_at(at, rest, "u&")) return true;
        break;
      default:
        break;
    }
  }
  return false;
}

}  // namespace

bool may_matter(std::string_view sql, bool shape_changes) {
  return shape_changes ? scan<true>(sql) : scan<false>(sql);
}

}  // namespace predrop::parser
