// Canonical one-line-per-fact rendering of Facts, shared by the corpus test and its dump mode.
// The corpus files spell expectations in exactly this form (see corpus/README.md).
#pragma once

#include "parser/parser.hpp"

#include <string>
#include <vector>

namespace predrop::parser::testing {

inline bool plain_identifier(const std::string& s) {
  if (s.empty()) return false;
  if (!((s[0] >= 'a' && s[0] <= 'z') || s[0] == '_')) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '$')) return false;
  return true;
}

inline std::string quote_if_needed(const std::string& s) {
  if (plain_identifier(s)) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

inline std::string render_target(const Target& t) {
  std::string out = "target " + std::string(to_string(t.kind));
  if (t.kind != DestroyKind::drop_owned) {
    out += ' ';
    if (!t.relation.schema.empty()) out += quote_if_needed(t.relation.schema) + ".";
    out += quote_if_needed(t.relation.name);
  }
  if (!t.roles.empty()) {
    out += " roles=";
    for (size_t i = 0; i < t.roles.size(); ++i) {
      const std::string& r = t.roles[i];
      const bool special = r == "CURRENT_USER" || r == "SESSION_USER" || r == "CURRENT_ROLE" || r == "PUBLIC";
      out += (i ? "," : "") + (special ? r : quote_if_needed(r));
    }
  }
  if (t.if_exists) out += " if_exists";
  if (t.cascade) out += " cascade";
  if (!t.action.empty()) out += " action=" + quote_if_needed(t.action);
  return out;
}

inline std::string render_relation(const RelationName& r) {
  return (r.schema.empty() ? std::string() : quote_if_needed(r.schema) + ".") + quote_if_needed(r.name);
}

inline std::vector<std::string> render_facts(const Facts& f) {
  std::vector<std::string> lines;
  for (size_t i = 0; i < f.statements.size(); ++i) {
    const Statement& s = f.statements[i];
    const std::string n = std::to_string(i) + " ";
    for (const Target& t : s.targets) lines.push_back(n + render_target(t));
    for (const YieldTarget& y : s.yields)
      lines.push_back(n + "yield " + std::string(to_string(y.kind)) + " " +
                      (y.schema.empty() ? std::string() : quote_if_needed(y.schema) + ".") + quote_if_needed(y.name) +
                      (y.method.empty() ? std::string() : " using " + quote_if_needed(y.method)));
    for (const ShapeChange& c : s.changes)
      lines.push_back(n + "change " + (c.kind == ShapeChange::Kind::create ? "create " : "alter ") +
                      render_relation(c.relation));
    auto setting = [&](const char* name, const SettingChange& c) {
      static const char* scopes[] = {"session", "local", "reset"};
      std::string line = n + name + " " + scopes[static_cast<int>(c.scope)];
      if (c.to_default) line += " default";
      for (const auto& value : c.values) line += " " + quote_if_needed(value);
      lines.push_back(line);
    };
    if (s.search_path) setting("search_path", *s.search_path);
    if (s.role) setting("role", *s.role);
    if (s.session_authorization) setting("session_authorization", *s.session_authorization);
    if (s.txn != TxnControl::none) {
      static const char* kinds[] = {"none", "begin", "commit", "rollback", "savepoint",
                                    "release", "rollback_to", "prepare", "commit_prepared",
                                    "rollback_prepared"};
      std::string line = n + "txn " + kinds[static_cast<int>(s.txn)];
      if (!s.savepoint.empty()) line += " " + quote_if_needed(s.savepoint);
      lines.push_back(line);
    }
    if (s.unresolved_risk) lines.push_back(n + "unresolved");
    if (s.temporary) lines.push_back(n + "temporary");
    if (s.unparsed) lines.push_back(n + "unparsed");
  }
  return lines;
}

}  // namespace predrop::parser::testing
