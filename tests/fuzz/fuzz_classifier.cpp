// libFuzzer target for the parser: arbitrary bytes through the prefilter, the classifier and the
// search_path splitter. Beyond "no crash, no sanitizer report" it checks the property the
// proxy relies on: anything the classifier reports (other than transaction control) must have
// passed may_matter(), or the prefilter would hide a destructive statement or what a quarantined
// table yields (DROP ROLE, TABLESPACE …: session_hold.cpp holds those too); and a DROP appended
// to any input is found or reported unparsed, never lost (the scanner fallback's promise); with
// standard_conforming_strings off as well as on. In shape mode (shape_changes) also: a shape
// change, or transaction control other than BEGIN/COMMIT/ROLLBACK, must have passed
// may_matter(text, true), and shape mode only adds facts to the default mode's.
#include "parser/parser.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

using namespace predrop::parser;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const bool passes = may_matter(text);

  // libpg_query reads up to the first NUL; the prefilter saw at least those bytes.
  const Facts facts = classify_uncached(text);
  const bool reportable = facts.destroys() || facts.unresolved() || facts.touches_search_path() || facts.yields();
  if (reportable && !passes) {
    std::fprintf(stderr, "prefilter unsound: classifier reports facts for text may_matter() rejects\n");
    std::abort();
  }
  if (facts.parse_error && facts.error_message.empty()) std::abort();
  // Every statement the proxy records or holds carries a fingerprint, and no other does.
  if (!facts.fingerprint.empty() != (facts.destroys() || facts.unresolved() || facts.unparsed() || facts.yields()))
    std::abort();
  if (facts.unparsed() && !facts.parse_error) std::abort();  // only the scanner fallback reports it
  if ((facts.unparsed() || facts.destroys()) && !passes) {
    std::fprintf(stderr, "prefilter unsound: an unparsed or destructive statement in text may_matter() rejects\n");
    std::abort();
  }
  for (const Statement& s : facts.statements) {
    for (const Target& t : s.targets) {
      if (to_string(t.kind).empty() || destroy_kind_from_string(to_string(t.kind)) != t.kind) std::abort();
      if (t.kind != DestroyKind::drop_owned && t.relation.name.empty()) std::abort();
    }
  }

  // The same bytes with a DROP appended: most inputs are not SQL, so this drives the scanner
  // fallback (split, per-statement parse, names read from tokens). The DROP is its own statement
  // whenever the input scans and leaves no '(' open, and must then be found.
  {
    const std::string sql = std::string(text.substr(0, text.find('\0'))) + "\n;DROP TABLE fuzz_sentinel";
    const Facts with_drop = classify_uncached(sql);
    bool found = false;
    for (const Statement& s : with_drop.statements)
      for (const Target& t : s.targets) found = found || t.relation.name == "fuzz_sentinel";
    if (!found && !with_drop.unparsed()) {
      std::fprintf(stderr, "a DROP after the input was neither found nor reported unparsed\n");
      std::abort();
    }
  }

  // The same bytes lexed with standard_conforming_strings off (a backslash escapes inside '…'):
  // the same promises, and the setting must not leak into the next text on the thread.
  {
    const Facts off = classify_uncached(text, false);
    if ((off.destroys() || off.unresolved() || off.touches_search_path() || off.unparsed() || off.yields()) && !passes) {
      std::fprintf(stderr, "prefilter unsound with standard_conforming_strings off\n");
      std::abort();
    }
    if (!off.fingerprint.empty() != (off.destroys() || off.unresolved() || off.unparsed() || off.yields())) std::abort();
    if (classify_uncached(text).fingerprint != facts.fingerprint) std::abort();
  }

  // Shape mode: what the "after" capture needs must get past its prefilter too.
  {
    const bool shape_passes = may_matter(text, true);
    if (passes && !shape_passes) {
      std::fprintf(stderr, "the shape prefilter rejects text the default prefilter passes\n");
      std::abort();
    }
    const Facts shape = classify_uncached(text, true, true);
    bool needs_pass = shape.changes_shape() || shape.destroys() || shape.unresolved() ||
                      shape.touches_search_path() || shape.unparsed() || shape.yields();
    for (const Statement& s : shape.statements) {
      needs_pass = needs_pass || (s.txn != TxnControl::none && s.txn != TxnControl::begin &&
                                  s.txn != TxnControl::commit && s.txn != TxnControl::rollback);
      for (const ShapeChange& c : s.changes)
        if (c.relation.name.empty()) std::abort();
    }
    if (needs_pass && !shape_passes) {
      std::fprintf(stderr, "shape prefilter unsound: shape mode reports facts for text may_matter(text, true) rejects\n");
      std::abort();
    }
    if (!shape.fingerprint.empty() !=
        (shape.destroys() || shape.unresolved() || shape.unparsed() || shape.changes_shape() || shape.yields()))
      std::abort();
    if (shape.statements.size() != facts.statements.size() || shape.parse_error != facts.parse_error) std::abort();
    for (size_t i = 0; i < facts.statements.size(); ++i) {
      const Statement& a = facts.statements[i];
      const Statement& b = shape.statements[i];
      if (!a.changes.empty() || b.targets.size() < a.targets.size() || b.unresolved_risk != a.unresolved_risk ||
          b.unparsed != a.unparsed || b.search_path.has_value() != a.search_path.has_value()) {
        std::fprintf(stderr, "shape mode changed a default-mode fact\n");
        std::abort();
      }
    }
    const Facts shape_off = classify_uncached(text, false, true);
    if ((shape_off.changes_shape() || shape_off.destroys() || shape_off.unparsed()) && !shape_passes) {
      std::fprintf(stderr, "shape prefilter unsound with standard_conforming_strings off\n");
      std::abort();
    }
  }

  // The same bytes as a search_path value: must not crash, names obey the 63-byte limit.
  if (auto schemas = parse_search_path(text)) {
    for (const auto& s : *schemas)
      if (s.size() > 63) std::abort();
  }
  return 0;
}
