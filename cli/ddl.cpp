#include "cli/ddl.hpp"

#include <algorithm>
#include <set>
#include <sstream>
#include <vector>

namespace predrop::cli {

using namespace predrop::capture;
using namespace predrop::evidence;

namespace {

// PostgreSQL's keywords that quote_ident() quotes (every category but unreserved), PG 15.
const std::set<std::string>& quoted_keywords() {
  static const std::set<std::string> k = [] {
    std::istringstream in(
        "all analyse analyze and any array as asc asymmetric authorization between bigint binary bit boolean both "
        "case cast char character check coalesce collate collation column concurrently constraint create cross "
        "current_catalog current_date current_role current_schema current_time current_timestamp current_user dec "
        "decimal default deferrable desc distinct do else end except exists extract false fetch float for foreign "
        "freeze from full grant greatest group grouping having ilike in initially inner inout int integer intersect "
        "interval into is isnull join lateral leading least left like limit localtime localtimestamp national "
        "natural nchar none normalize not notnull null nullif numeric offset on only or order out outer overlaps "
        "overlay placing position precision primary real references returning right row select session_user setof "
        "similar smallint some substring symmetric table tablesample then time timestamp to trailing treat trim "
        "true union unique user using values varchar variadic verbose when where window with xmlattributes "
        "xmlconcat xmlelement xmlexists xmlforest xmlnamespaces xmlparse xmlpi xmlroot xmlserialize xmltable");
    std::set<std::string> s;
    for (std::string w; in >> w;) s.insert(w);
    return s;
  }();
  return k;
}

}  // namespace

std::string quote_ident_if_needed(const std::string& name) {
  bool safe = !name.empty() && ((name[0] >= 'a' && name[0] <= 'z') || name[0] == '_');
  for (char ch : name) safe = safe && ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_');
  if (safe && !quoted_keywords().count(name)) return name;
  std::string out = "\"";
  for (char ch : name) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}

std::string create_table_ddl(const StoredSnapshot& s, const std::string& name_override) {
  std::string name = quote_ident_if_needed(s.schema_name) + "." + quote_ident_if_needed(s.table_name);
  if (!name_override.empty()) {
    auto [schema, table] = split_qualified(name_override, s.schema_name);
    name = quote_ident_if_needed(schema) + "." + quote_ident_if_needed(table);
  }
  std::vector<const ColumnProfile*> cols;
  for (const auto& c : s.columns) cols.push_back(&c);
  std::stable_sort(cols.begin(), cols.end(), [](auto* a, auto* b) { return a->ordinal < b->ordinal; });
  std::string out = "-- recreates the shape of snapshot " + s.id + " (" + s.captured_at + ", " + s.reason + ")\n";
  out += "CREATE TABLE " + name + " (";
  for (size_t i = 0; i < cols.size(); ++i)
    out += std::string(i ? "," : "") + "\n  " + quote_ident_if_needed(cols[i]->name) + " " + cols[i]->pg_type;
  return out + (cols.empty() ? ");\n" : "\n);\n");
}

}  // namespace predrop::cli
