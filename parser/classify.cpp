// classify_uncached(): libpg_query's JSON parse tree walked with nlohmann::json.
// JSON rather than protobuf because pg_query_parse is 3-6x cheaper than parse_protobuf+unpack
// (2 µs against 12 µs for a pgbench SELECT, measured on this machine's kind) and the walk only
// reads a handful of node types.
//
// Choices worth knowing (soundness against usefulness):
// - Every DO block is unresolved risk, whatever its body says: a body can build its DROP with
//   EXECUTE format(...), so scanning it for keywords would not be sound.
// - CALL and EXECUTE (also under EXPLAIN / CREATE TABLE AS) are unresolved: the body is not in
//   the text. A plain SELECT f() is not: treating every function call as a possible DROP would
//   flag nearly all traffic, and functions doing DDL are the rare, deliberate case.
// - A DROP of any other object type with CASCADE (TYPE, DOMAIN, FUNCTION, COLLATION, SERVER …)
//   is unresolved: the cascade can drop columns or foreign tables that the text does not name.
//   DROP EXTENSION is unresolved even without CASCADE (it drops the extension's own tables).
// - set_config('search_path', …) is read wherever it appears in a statement that runs a query;
//   when its name, value or is_local is not a literal, the statement is unresolved risk, since
//   the path that later names resolve against is then unknown. UPDATE pg_settings likewise.
// - Names qualified with pg_temp / pg_temp_N are temporary and dropped from the targets; a
//   statement whose targets were all temporary is marked temporary.
// - ALTER TABLE subcommands that rewrite the table but keep its shape (columns, types, order)
//   are no target: SET EXPRESSION (PostgreSQL 17) recomputes a generated column from the columns
//   that stay, like DROP EXPRESSION and SET DEFAULT; SET ACCESS METHOD like SET TABLESPACE.
// - A text the parser rejects is classified by the scanner fallback (fallback.cpp).
// - Shape changes (asked for with shape_changes) are read only where the statement itself runs:
//   CREATE TABLE / FOREIGN TABLE / TABLE AS / MATERIALIZED VIEW, SELECT INTO (also the leftmost
//   arm of a UNION, where the server takes INTO from), CREATE SCHEMA … CREATE TABLE, EXPLAIN
//   ANALYZE of CREATE TABLE AS or SELECT INTO, REFRESH, and ALTER / RENAME / SET SCHEMA of a
//   table, foreign table or materialized view. A view has no rows to capture and is left out; so
//   is a temporary relation (TEMP, or a pg_temp name). A PREPAREd statement's SELECT INTO runs
//   only at EXECUTE, which is unresolved anyway. Without shape_changes the facts are exactly those
//   of a classifier that knows nothing of shapes: ADD COLUMN is then no target, and COMMIT /
//   ROLLBACK PREPARED no transaction control.
#include "parser/classify_parts.hpp"
#include "parser/identifiers.hpp"
#include "parser/parser.hpp"
#include "parser/scan.hpp"

#include <pg_query.h>
#include <pg_query/pg_query.pb-c.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>

namespace predrop::parser {
namespace {

using json = nlohmann::json;

const json* child(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

std::string text(const json& obj, const char* key) {
  const json* v = child(obj, key);
  return v && v->is_string() ? v->get<std::string>() : std::string();
}

bool flag(const json& obj, const char* key) {
  const json* v = child(obj, key);
  return v && v->is_boolean() && v->get<bool>();
}

// A Node is {"TypeName": {...}}: its single key names the type.
std::pair<std::string_view, const json*> unwrap(const json& node) {
  if (!node.is_object() || node.size() != 1) return {{}, nullptr};
  auto it = node.begin();
  return {std::string_view(it.key()), &it.value()};
}

const json& items_of(const json& obj, const char* key) {
  static const json empty = json::array();
  const json* v = child(obj, key);
  return v && v->is_array() ? *v : empty;
}

using detail::is_temp_schema;

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

// A name list [catalog.]schema.name of String nodes; the catalog part is ignored.
RelationName name_from_list(const json& list) {
  std::vector<std::string> parts;
  for (const json& item : list) {
    auto [type, body] = unwrap(item);
    if (type == "String") parts.push_back(text(*body, "sval"));
  }
  RelationName out;
  if (!parts.empty()) out.name = parts.back();
  if (parts.size() >= 2) out.schema = parts[parts.size() - 2];
  return out;
}

RelationName name_from_rangevar(const json& rv) {
  return RelationName{text(rv, "schemaname"), text(rv, "relname")};
}

// Literal constant of an A_Const node, as the server would flatten it into a GUC value.
struct Literal {
  enum class Kind { none, string, number, boolean, null } kind = Kind::none;
  std::string value;
  bool boolean = false;
};

Literal literal_of(const json& node) {
  Literal lit;
  auto [type, body] = unwrap(node);
  if (type == "TypeCast") {  // 'x'::text, 'true'::bool: the cast does not hide the constant
    if (const json* arg = child(*body, "arg")) return literal_of(*arg);
    return lit;
  }
  if (type != "A_Const") return lit;
  if (flag(*body, "isnull")) {
    lit.kind = Literal::Kind::null;
  } else if (const json* s = child(*body, "sval")) {
    lit.kind = Literal::Kind::string;
    lit.value = text(*s, "sval");
  } else if (const json* i = child(*body, "ival")) {
    lit.kind = Literal::Kind::number;
    const json* v = child(*i, "ival");  // 0 is omitted by the JSON output
    lit.value = v && v->is_number_integer() ? std::to_string(v->get<long long>()) : "0";
  } else if (const json* f = child(*body, "fval")) {
    lit.kind = Literal::Kind::number;
    lit.value = text(*f, "fval");
  } else if (const json* b = child(*body, "boolval")) {
    lit.kind = Literal::Kind::boolean;
    lit.boolean = flag(*b, "boolval");  // false is omitted
  }
  return lit;
}

// parse_bool() of the server for an unknown-typed literal used as boolean.
std::optional<bool> literal_bool(const Literal& lit) {
  if (lit.kind == Literal::Kind::boolean) return lit.boolean;
  if (lit.kind == Literal::Kind::null) return false;  // set_config treats NULL is_local as false
  if (lit.kind == Literal::Kind::number) {
    if (lit.value == "1") return true;
    if (lit.value == "0") return false;
    return std::nullopt;
  }
  if (lit.kind != Literal::Kind::string) return std::nullopt;
  std::string v;
  for (char c : lit.value)
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') v.push_back(c);
  for (const char* t : {"t", "tr", "tru", "true", "y", "ye", "yes", "on", "1"})
    if (iequals(v, t)) return true;
  for (const char* f : {"f", "fa", "fal", "fals", "false", "n", "no", "of", "off", "0"})
    if (iequals(v, f)) return false;
  return std::nullopt;
}

Target make_target(DestroyKind kind, RelationName relation) {
  Target t;
  t.kind = kind;
  t.relation = std::move(relation);
  return t;
}

// The relation kinds whose shape predrop captures (partitioned tables are OBJECT_TABLE).
bool shaped(std::string_view objtype) {
  return objtype == "OBJECT_TABLE" || objtype == "OBJECT_FOREIGN_TABLE" || objtype == "OBJECT_MATVIEW";
}

class StatementWalker {
 public:
  StatementWalker(Statement& out, bool shape_changes) : out_(out), shape_changes_(shape_changes) {}

  void walk(const json& stmt_node) {
    auto [type, body] = unwrap(stmt_node);
    if (!body) return;
    if (type == "DropStmt") drop(*body);
    else if (type == "DropOwnedStmt") drop_owned(*body);
    else if (type == "DropRoleStmt") drop_role(*body);
    else if (type == "DropTableSpaceStmt") yield(YieldTarget::Kind::tablespace, text(*body, "tablespacename"));
    else if (type == "TruncateStmt") truncate(*body);
    else if (type == "AlterTableStmt") alter_table(*body);
    else if (type == "RenameStmt") rename(*body);
    else if (type == "AlterObjectSchemaStmt") set_schema(*body);
    else if (type == "VariableSetStmt") variable_set(*body);
    else if (type == "DiscardStmt") discard(*body);
    else if (type == "TransactionStmt") transaction(*body);
    else if (type == "DoStmt" || type == "CallStmt" || type == "ExecuteStmt") out_.unresolved_risk = true;
    else if (type == "ExplainStmt" || type == "CreateTableAsStmt") wrapped_query(type, *body, true);
    else if (type == "CreateStmt") create_table(*body, {});
    else if (type == "CreateForeignTableStmt") {
      if (const json* base = child(*body, "base")) create_table(*base, {});
    } else if (type == "CreateSchemaStmt") create_schema(*body);
    else if (type == "RefreshMatViewStmt") {
      if (const json* rel = child(*body, "relation")) change(ShapeChange::Kind::alter, *rel);
    }
    else if (type == "SelectStmt" || type == "InsertStmt" || type == "UpdateStmt" ||
             type == "DeleteStmt" || type == "MergeStmt" || type == "CopyStmt" ||
             type == "DeclareCursorStmt")
      runs_query(type, *body, true);
    finish_temporary();
  }

 private:
  Target& add(DestroyKind kind, RelationName relation) {
    if (!relation.schema.empty() && is_temp_schema(relation.schema)) {
      ++temporary_;
      scratch_ = make_target(kind, std::move(relation));
      return scratch_;  // filled in by the caller, then forgotten
    }
    out_.targets.push_back(make_target(kind, std::move(relation)));
    return out_.targets.back();
  }

  // rel: a RangeVar. `relation` overrides its name (RENAME TO, SET SCHEMA give the new one).
  // Temporary relations are out of scope, and the server moves nothing into or out of pg_temp.
  void change(ShapeChange::Kind kind, const json& rel, std::optional<RelationName> relation = std::nullopt) {
    if (!shape_changes_) return;
    if (text(rel, "relpersistence") == "t" || is_temp_schema(text(rel, "schemaname"))) return;
    RelationName name = relation ? std::move(*relation) : name_from_rangevar(rel);
    if (name.name.empty() || is_temp_schema(name.schema)) return;
    out_.changes.push_back(ShapeChange{kind, std::move(name)});
  }

  // CREATE TABLE (LIKE, PARTITION OF, INHERITS, OF type) and the base of CREATE FOREIGN TABLE.
  // schema: the schema of an enclosing CREATE SCHEMA, which names every element it creates.
  void create_table(const json& s, const std::string& schema) {
    const json* rel = child(s, "relation");
    if (!rel) return;
    if (schema.empty() || !text(*rel, "schemaname").empty()) change(ShapeChange::Kind::create, *rel);
    else change(ShapeChange::Kind::create, *rel, RelationName{schema, text(*rel, "relname")});
  }

  // CREATE SCHEMA s CREATE TABLE t …: t is s.t. CREATE SCHEMA AUTHORIZATION r names the schema
  // after the role; with CURRENT_USER and the like the name is not in the text, and the table is
  // left out rather than reported unqualified (which would resolve against search_path).
  void create_schema(const json& s) {
    if (!shape_changes_) return;
    std::string schema = text(s, "schemaname");
    if (schema.empty())
      if (const json* role = child(s, "authrole"); role && text(*role, "roletype") == "ROLESPEC_CSTRING")
        schema = text(*role, "rolename");
    if (schema.empty()) return;
    for (const json& element : items_of(s, "schemaElts")) {
      auto [type, body] = unwrap(element);
      if (type == "CreateStmt" && body) create_table(*body, schema);
    }
  }

  void finish_temporary() {
    if (temporary_ > 0 && out_.targets.empty()) out_.temporary = true;
  }

  void drop(const json& s) {
    const std::string remove = text(s, "removeType");
    const bool cascade = text(s, "behavior") == "DROP_CASCADE";
    const bool if_exists = flag(s, "missing_ok");
    std::optional<DestroyKind> kind;
    if (remove == "OBJECT_TABLE") kind = DestroyKind::drop_table;
    else if (remove == "OBJECT_MATVIEW") kind = DestroyKind::drop_matview;
    else if (remove == "OBJECT_VIEW") kind = DestroyKind::drop_view;
    else if (remove == "OBJECT_FOREIGN_TABLE") kind = DestroyKind::drop_foreign_table;
    else if (remove == "OBJECT_SCHEMA") kind = DestroyKind::drop_schema;

    if (!kind) {
      drop_yields(remove, s);
      static constexpr std::string_view kCascadeHarmless[] = {
          "OBJECT_INDEX", "OBJECT_TRIGGER", "OBJECT_POLICY", "OBJECT_RULE", "OBJECT_STATISTIC_EXT",
          "OBJECT_PUBLICATION", "OBJECT_EVENT_TRIGGER", "OBJECT_SEQUENCE"};
      bool harmless = false;
      for (auto h : kCascadeHarmless) harmless = harmless || remove == h;
      if ((cascade && !harmless) || remove == "OBJECT_EXTENSION") out_.unresolved_risk = true;
      return;
    }
    for (const json& object : items_of(s, "objects")) {
      auto [type, body] = unwrap(object);
      RelationName name;
      if (type == "List") name = name_from_list(items_of(*body, "items"));
      else if (type == "String") name.name = text(*body, "sval");  // DROP SCHEMA s
      else continue;
      if (*kind == DestroyKind::drop_schema && is_temp_schema(name.name)) {
        ++temporary_;
        continue;
      }
      Target& t = add(*kind, std::move(name));
      t.if_exists = if_exists;
      t.cascade = cascade;
    }
  }

  void yield(YieldTarget::Kind kind, std::string name, std::string schema = {}, std::string method = {}) {
    if (name.empty()) return;
    out_.yields.push_back(YieldTarget{kind, std::move(name), std::move(schema), std::move(method)});
  }

  // DROP ROLE names roles only (the server refuses CURRENT_USER and the like there).
  void drop_role(const json& s) {
    for (const json& role : items_of(s, "roles")) {
      auto [type, body] = unwrap(role);
      if (type == "RoleSpec" && text(*body, "roletype") == "ROLESPEC_CSTRING")
        yield(YieldTarget::Kind::role, text(*body, "rolename"));
    }
  }

  // DROP ACCESS METHOD / EXTENSION name, …; DROP OPERATOR CLASS / FAMILY [schema.]name USING method,
  // whose object is the list (method, [schema,] name).
  void drop_yields(const std::string& remove, const json& s) {
    std::optional<YieldTarget::Kind> kind;
    if (remove == "OBJECT_ACCESS_METHOD") kind = YieldTarget::Kind::access_method;
    else if (remove == "OBJECT_EXTENSION") kind = YieldTarget::Kind::extension;
    else if (remove == "OBJECT_OPCLASS") kind = YieldTarget::Kind::operator_class;
    else if (remove == "OBJECT_OPFAMILY") kind = YieldTarget::Kind::operator_family;
    if (!kind) return;
    for (const json& object : items_of(s, "objects")) {
      auto [type, body] = unwrap(object);
      if (type == "String") {
        yield(*kind, text(*body, "sval"));
      } else if (type == "List") {
        std::vector<std::string> parts;
        for (const json& item : items_of(*body, "items"))
          if (auto [t, b] = unwrap(item); t == "String") parts.push_back(text(*b, "sval"));
        if (parts.size() < 2) continue;
        yield(*kind, parts.back(), parts.size() >= 3 ? parts[parts.size() - 2] : std::string(), parts.front());
      }
    }
  }

  void drop_owned(const json& s) {
    Target t = make_target(DestroyKind::drop_owned, {});
    t.cascade = text(s, "behavior") == "DROP_CASCADE";
    for (const json& role : items_of(s, "roles")) {
      auto [type, body] = unwrap(role);
      if (type != "RoleSpec") continue;
      const std::string kind = text(*body, "roletype");
      if (kind == "ROLESPEC_CSTRING") t.roles.push_back(text(*body, "rolename"));
      else if (kind == "ROLESPEC_CURRENT_USER") t.roles.push_back("CURRENT_USER");
      else if (kind == "ROLESPEC_SESSION_USER") t.roles.push_back("SESSION_USER");
      else if (kind == "ROLESPEC_CURRENT_ROLE") t.roles.push_back("CURRENT_ROLE");
      else if (kind == "ROLESPEC_PUBLIC") t.roles.push_back("PUBLIC");
    }
    out_.targets.push_back(std::move(t));
  }

  void truncate(const json& s) {
    const bool cascade = text(s, "behavior") == "DROP_CASCADE";
    for (const json& rel : items_of(s, "relations")) {
      auto [type, body] = unwrap(rel);
      if (type != "RangeVar") continue;
      add(DestroyKind::truncate, name_from_rangevar(*body)).cascade = cascade;
    }
  }

  static bool relation_like(std::string_view objtype) {
    return objtype == "OBJECT_TABLE" || objtype == "OBJECT_FOREIGN_TABLE" ||
           objtype == "OBJECT_MATVIEW" || objtype == "OBJECT_VIEW";
  }

  // ALTER TABLE / FOREIGN TABLE / MATERIALIZED VIEW / VIEW: one target per statement, the
  // destructive subcommands joined ("DROP COLUMN a, ALTER COLUMN b TYPE"). ADD COLUMN and the
  // like leave the old shape derivable and are not reported, except with shape_changes: the
  // "after" of an ADD COLUMN pairs with a "before", which only a held statement gets taken.
  void alter_table(const json& s) {
    const std::string objtype = text(s, "objtype");
    const bool adds_columns = shape_changes_ && relation_like(objtype);  // not ALTER TYPE ADD ATTRIBUTE
    std::string actions;
    bool destroys = false, cascade = false;
    for (const json& cmd : items_of(s, "cmds")) {
      auto [type, body] = unwrap(cmd);
      if (type != "AlterTableCmd") continue;
      const std::string subtype = text(*body, "subtype");
      std::string action;
      if (subtype == "AT_DropColumn") action = "DROP COLUMN " + text(*body, "name");
      else if (subtype == "AT_AlterColumnType") action = "ALTER COLUMN " + text(*body, "name") + " TYPE";
      else if (subtype == "AT_AddColumn" && adds_columns) {
        const json* def = child(*body, "def");
        const json* column = def ? child(*def, "ColumnDef") : nullptr;
        action = "ADD COLUMN " + (column ? text(*column, "colname") : std::string());
      } else {
        continue;
      }
      destroys = destroys || subtype != "AT_AddColumn";
      cascade = cascade || text(*body, "behavior") == "DROP_CASCADE";
      if (!actions.empty()) actions += ", ";
      actions += action;
    }
    if (actions.empty()) return;
    if (objtype == "OBJECT_TYPE") {  // ALTER TYPE … DROP ATTRIBUTE: typed tables change with it
      if (destroys) out_.unresolved_risk = true;
      return;
    }
    if (!relation_like(objtype)) return;
    const json* rel = child(s, "relation");
    if (!rel) return;
    if (shaped(objtype)) change(ShapeChange::Kind::alter, *rel);
    Target& t = add(DestroyKind::alter_table, name_from_rangevar(*rel));
    t.if_exists = flag(s, "missing_ok");
    t.cascade = cascade;
    t.action = std::move(actions);
  }

  void rename(const json& s) {
    const std::string rename_type = text(s, "renameType");
    const json* rel = child(s, "relation");
    if (!rel) return;
    std::string action;
    if (rename_type == "OBJECT_COLUMN" && relation_like(text(s, "relationType"))) {
      action = "RENAME COLUMN " + text(s, "subname") + " TO " + text(s, "newname");
      if (shaped(text(s, "relationType"))) change(ShapeChange::Kind::alter, *rel);
    } else if (relation_like(rename_type)) {
      action = "RENAME TO " + text(s, "newname");
      if (shaped(rename_type))  // RENAME TO keeps the schema
        change(ShapeChange::Kind::alter, *rel, RelationName{text(*rel, "schemaname"), text(s, "newname")});
    } else {
      return;
    }
    Target& t = add(DestroyKind::alter_table, name_from_rangevar(*rel));
    t.if_exists = flag(s, "missing_ok");
    t.action = std::move(action);
  }

  // ALTER TABLE t SET SCHEMA s: the qualified name the snapshot was keyed by goes away.
  void set_schema(const json& s) {
    if (!relation_like(text(s, "objectType"))) return;
    const json* rel = child(s, "relation");
    if (!rel) return;
    if (shaped(text(s, "objectType")))
      change(ShapeChange::Kind::alter, *rel, RelationName{text(s, "newschema"), text(*rel, "relname")});
    Target& t = add(DestroyKind::alter_table, name_from_rangevar(*rel));
    t.if_exists = flag(s, "missing_ok");
    t.action = "SET SCHEMA " + text(s, "newschema");
  }

  // SET / RESET of search_path, role or session_authorization: the three read their kinds alike.
  void variable_set(const json& s) {
    const std::string kind = text(s, "kind");
    if (kind == "VAR_RESET_ALL") {  // role and session_authorization are GUC_NO_RESET_ALL
      out_.search_path = to_default(false);
      return;
    }
    const std::string name = text(s, "name");
    const bool is_path = iequals(name, "search_path"), is_role = iequals(name, "role");
    if (!is_path && !is_role && !iequals(name, "session_authorization")) return;
    const bool local = flag(s, "is_local");
    SettingChange change;
    if (kind == "VAR_RESET" || kind == "VAR_SET_DEFAULT") {
      change = to_default(local && kind == "VAR_SET_DEFAULT");
    } else if (kind == "VAR_SET_VALUE") {
      // search_path: each argument is one schema (the server quotes every element before
      // splitting the flattened value again, so 'a, b' names a single schema "a, b"). role and
      // session_authorization: one name, NONE included.
      change.scope = local ? SettingChange::Scope::local : SettingChange::Scope::session;
      const json& args = items_of(s, "args");
      if (!is_path && args.size() != 1) {
        out_.unresolved_risk = true;
        return;
      }
      for (const json& arg : args) {
        Literal lit = literal_of(arg);
        if (lit.kind != Literal::Kind::string && !(is_path && lit.kind == Literal::Kind::number)) {
          out_.unresolved_risk = true;  // where unqualified names resolve from here on is unknown
          return;
        }
        change.values.push_back(truncate_identifier(std::move(lit.value)));
      }
    } else {
      return;  // VAR_SET_CURRENT (FROM CURRENT) keeps the value; VAR_SET_MULTI is SET TRANSACTION etc.
    }
    if (is_path) out_.search_path = std::move(change);
    else set_role_or_user(is_role, std::move(change));
  }

  // Back to the session default: RESET, SET … TO DEFAULT, set_config(…, NULL, …). Only SET LOCAL …
  // TO DEFAULT (or set_config(…, NULL, true)) lasts just to the transaction's end.
  static SettingChange to_default(bool local) {
    return SettingChange{local ? SettingChange::Scope::local : SettingChange::Scope::reset, {}, true};
  }

  // SET SESSION AUTHORIZATION and its RESET also end a SET ROLE (the server's SetSessionUserId()).
  void set_role_or_user(bool is_role, SettingChange change) {
    if (is_role) {
      out_.role = std::move(change);
      return;
    }
    const auto scope = change.scope == SettingChange::Scope::reset ? SettingChange::Scope::session : change.scope;
    out_.role = SettingChange{scope, {"none"}, false};
    out_.session_authorization = std::move(change);
  }

  void discard(const json& s) {
    if (text(s, "target") != "DISCARD_ALL") return;
    // SET SESSION AUTHORIZATION DEFAULT, then RESET ALL (guc.c's DiscardAll).
    out_.search_path = to_default(false);
    set_role_or_user(false, to_default(false));
  }

  void transaction(const json& s) {
    const std::string kind = text(s, "kind");
    if (kind == "TRANS_STMT_BEGIN" || kind == "TRANS_STMT_START") out_.txn = TxnControl::begin;
    else if (kind == "TRANS_STMT_COMMIT") out_.txn = TxnControl::commit;
    else if (kind == "TRANS_STMT_ROLLBACK") out_.txn = TxnControl::rollback;
    else if (kind == "TRANS_STMT_SAVEPOINT") out_.txn = TxnControl::savepoint;
    else if (kind == "TRANS_STMT_RELEASE") out_.txn = TxnControl::release;
    else if (kind == "TRANS_STMT_ROLLBACK_TO") out_.txn = TxnControl::rollback_to;
    else if (kind == "TRANS_STMT_PREPARE") out_.txn = TxnControl::prepare;
    out_.savepoint = text(s, "savepoint_name");
    // COMMIT/ROLLBACK PREPARED act on another, already detached transaction: they decide whether
    // its shape changes commit, which only shape_changes asks about. The gid goes in `savepoint`.
    if (!shape_changes_) return;
    if (kind == "TRANS_STMT_COMMIT_PREPARED") out_.txn = TxnControl::commit_prepared;
    else if (kind == "TRANS_STMT_ROLLBACK_PREPARED") out_.txn = TxnControl::rollback_prepared;
    if (kind == "TRANS_STMT_PREPARE" || kind == "TRANS_STMT_COMMIT_PREPARED" || kind == "TRANS_STMT_ROLLBACK_PREPARED")
      out_.savepoint = text(s, "gid");
  }

  // EXPLAIN / CREATE TABLE AS around a query. executes: the query really runs (not under a plain
  // EXPLAIN), so a CREATE TABLE AS or SELECT INTO in it creates its table.
  void wrapped_query(std::string_view wrapper, const json& s, bool executes) {
    if (wrapper == "ExplainStmt") {
      executes = false;
      for (const json& option : items_of(s, "options")) {
        auto [type, body] = unwrap(option);
        if (type == "DefElem" && text(*body, "defname") == "analyze") executes = true;
      }
    } else if (executes) {
      const json* into = child(s, "into");
      const json* rel = into ? child(*into, "rel") : nullptr;
      const std::string objtype = text(s, "objtype");
      if (rel && (objtype == "OBJECT_TABLE" || objtype == "OBJECT_MATVIEW")) change(ShapeChange::Kind::create, *rel);
    }
    const json* query = child(s, "query");
    if (!query) return;
    auto [type, body] = unwrap(*query);
    if (type == "ExecuteStmt") {
      out_.unresolved_risk = true;
      return;
    }
    if (!body) return;
    if (type == "ExplainStmt" || type == "CreateTableAsStmt") {
      wrapped_query(type, *body, executes);  // EXPLAIN ANALYZE CREATE TABLE … AS EXECUTE …
      return;
    }
    runs_query(type, *body, executes && wrapper == "ExplainStmt");
  }

  // executes: a statement run for itself (top level, or under EXPLAIN ANALYZE), where SELECT INTO
  // creates its table; the query of CREATE TABLE AS cannot hold an INTO of its own.
  void runs_query(std::string_view type, const json& s, bool executes) {
    if (type == "SelectStmt" && executes) select_into(s);
    if (type == "UpdateStmt") {
      if (const json* rel = child(s, "relation"); rel && text(*rel, "relname") == "pg_settings") {
        const std::string schema = text(*rel, "schemaname");
        if (schema.empty() || schema == "pg_catalog") out_.unresolved_risk = true;
      }
    }
    find_set_config(s);
  }

  // Looks for set_config(...) anywhere below. Several calls setting different paths in one
  // statement leave the outcome to evaluation order: unresolved.
  // The recursion is bounded: a tree nested deeper than kMaxWalkDepth (thousands of NOTs or
  // parentheses) is not inspected further and counts as unresolved, which is sound and keeps
  // worker-thread stacks safe.
  static constexpr int kMaxWalkDepth = 4000;
  void find_set_config(const json& node, int depth = 0) {
    if (depth > kMaxWalkDepth) {
      out_.unresolved_risk = true;
      return;
    }
    if (node.is_array()) {
      for (const json& item : node) find_set_config(item, depth + 1);
      return;
    }
    if (!node.is_object()) return;
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (it.key() == "FuncCall") set_config_call(it.value());
      find_set_config(it.value(), depth + 1);
    }
  }

  void set_config_call(const json& call) {
    const json& name = items_of(call, "funcname");
    if (name.empty()) return;
    auto [type, body] = unwrap(name.back());
    if (type != "String" || text(*body, "sval") != "set_config") return;
    const json& args = items_of(call, "args");
    if (args.size() != 3) return;  // no such function; the server rejects it
    const Literal guc = literal_of(args[0]);
    if (guc.kind != Literal::Kind::string) {
      out_.unresolved_risk = true;  // which setting is unknown
      return;
    }
    const bool is_role = iequals(guc.value, "role"), is_user = iequals(guc.value, "session_authorization");
    if (!iequals(guc.value, "search_path") && !is_role && !is_user) return;
    const Literal value = literal_of(args[1]);
    const std::optional<bool> local = literal_bool(literal_of(args[2]));
    if (!local || (value.kind != Literal::Kind::string && value.kind != Literal::Kind::null)) {
      out_.unresolved_risk = true;
      return;
    }
    const auto scope = *local ? SettingChange::Scope::local : SettingChange::Scope::session;
    if (is_role || is_user) {
      if (seen_role_config_) out_.unresolved_risk = true;  // the order of calls in one statement is the planner's
      seen_role_config_ = true;
      set_role_or_user(is_role, value.kind == Literal::Kind::null
                                    ? to_default(*local)
                                    : SettingChange{scope, {truncate_identifier(value.value)}, false});
      return;
    }
    if (value.kind == Literal::Kind::null) {  // a NULL value resets to the default
      record(to_default(*local));
      return;
    }
    auto schemas = parse_search_path(value.value);
    if (!schemas) return;  // the server rejects the value: no change
    record(SettingChange{scope, std::move(*schemas), false});
  }

  void record(SettingChange change) {
    if (out_.search_path && seen_set_config_ &&
        (out_.search_path->scope != change.scope || out_.search_path->values != change.values ||
         out_.search_path->to_default != change.to_default))
      out_.unresolved_risk = true;
    seen_set_config_ = true;
    out_.search_path = std::move(change);
  }

  // SELECT … INTO t: the server takes INTO from the leftmost arm of a set operation.
  void select_into(const json& s) {
    const json* select = &s;
    for (int depth = 0; select && depth < kMaxWalkDepth; ++depth) {
      if (const json* into = child(*select, "intoClause")) {
        if (const json* rel = child(*into, "rel")) change(ShapeChange::Kind::create, *rel);
        return;
      }
      const json* larg = child(*select, "larg");
      select = larg;
    }
  }

  Statement& out_;
  const bool shape_changes_;
  Target scratch_ = make_target(DestroyKind::drop_table, {});
  int temporary_ = 0;
  bool seen_set_config_ = false;
  bool seen_role_config_ = false;
};

void compute_fingerprint(const std::string& sql, Facts& facts) {
  PgQueryFingerprintResult fp = pg_query_fingerprint_opts(sql.c_str(), detail::parser_options());
  if (!fp.error && fp.fingerprint_str) facts.fingerprint = fp.fingerprint_str;
  pg_query_free_fingerprint_result(fp);
}

}  // namespace

namespace detail {

bool is_temp_schema(std::string_view schema) {
  if (schema == "pg_temp") return true;
  if (schema.substr(0, 8) != "pg_temp_" || schema.size() == 8) return false;
  for (char c : schema.substr(8))
    if (c < '0' || c > '9') return false;
  return true;
}

std::optional<std::string> parse_statements(const std::string& sql, std::vector<Statement>& out, bool shape_changes) {
  PgQueryParseResult parsed = pg_query_parse_opts(sql.c_str(), parser_options());
  if (parsed.error) {
    std::string message = parsed.error->message ? parsed.error->message : "parse error";
    pg_query_free_parse_result(parsed);
    return message;
  }
  json tree = json::parse(parsed.parse_tree ? parsed.parse_tree : "{}", nullptr, false);
  pg_query_free_parse_result(parsed);
  if (tree.is_discarded()) return "libpg_query produced unreadable JSON";  // cannot happen with a sane libpg_query
  for (const json& raw : items_of(tree, "stmts")) {
    Statement st;
    if (const json* node = child(raw, "stmt")) StatementWalker(st, shape_changes).walk(*node);
    // JSON leaves out zero fields: a missing stmt_len means "to the end of the text".
    auto number = [&](const char* key) -> uint64_t {
      auto it = raw.find(key);
      return it != raw.end() && it->is_number_unsigned() ? it->get<uint64_t>() : 0;
    };
    uint64_t begin = std::min<uint64_t>(number("stmt_location"), sql.size());
    uint64_t length = number("stmt_len");
    if (length == 0 || begin + length > sql.size()) length = sql.size() - begin;
    st.text_begin = static_cast<uint32_t>(begin);
    st.text_length = static_cast<uint32_t>(length);
    st.has_span = true;
    out.push_back(std::move(st));
  }
  return std::nullopt;
}

}  // namespace detail

Facts classify_uncached(std::string_view sql_view, bool standard_conforming_strings, bool shape_changes) {
  // libpg_query wants a NUL-terminated string and reads up to the first NUL.
  const std::string sql(sql_view.substr(0, sql_view.find('\0')));
  detail::StringSyntaxScope syntax(standard_conforming_strings);
  Facts facts;
  if (auto error = detail::parse_statements(sql, facts.statements, shape_changes))
    return detail::classify_fallback(sql, std::move(*error), shape_changes);

  if (standard_conforming_strings) {
    PgQueryNormalizeResult norm = pg_query_normalize(sql.c_str());
    if (!norm.error && norm.normalized_query) facts.normalized = detail::redact_literals(norm.normalized_query, false);
    pg_query_free_normalize_result(norm);
  } else {
    // pg_query_normalize has no options and would lex the literals as standard strings.
    facts.normalized = detail::redact_literals(sql, true);
  }

  // The "after" row of a shape change stores the normalised text and its fingerprint too.
  if (facts.recorded()) compute_fingerprint(sql, facts);
  if (facts.destroys()) facts.source = sql;
  return facts;
}

}  // namespace predrop::parser
