// parser/ — text in, facts out. "This statement destroys these relations, in these ways",
// "it changes search_path to …", "it may destroy something no parser can see".
// No sockets, no database, no policy. Thread-safe: libpg_query keeps its state per thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "parser/destroy_kind.hpp"

namespace predrop::parser {

// A name as the server would see it: unquoted identifiers already folded to lower case,
// quoted ones kept exactly. schema is empty when the statement did not qualify the name.
struct RelationName {
  std::string schema;
  std::string name;
  bool operator==(const RelationName&) const = default;
};

struct Target {
  DestroyKind kind;
  RelationName relation;            // drop_schema: relation.name is the schema, relation.schema empty
  std::vector<std::string> roles;   // drop_owned: the role names (CURRENT_USER etc. kept as written, upper-case)
  bool if_exists = false;
  bool cascade = false;
  std::string action;               // alter_table: "DROP COLUMN c", "ALTER COLUMN c TYPE", "RENAME COLUMN", "RENAME TO"
};

// A SET / RESET of a setting that decides where an unqualified name resolves, in statement order,
// so that a SET before a DROP in the same string counts: search_path, and role and
// session_authorization, which decide the schema "$user" on the path names.
struct SettingChange {
  enum class Scope : uint8_t { session, local, reset } scope = Scope::session;
  // search_path: schemas as the server would parse the value, "$user" and "pg_temp" kept as
  // tokens, quoted names exact, unquoted names folded. role / session_authorization: the one role
  // name, or none for SET ROLE NONE. Empty with reset (back to the default).
  std::vector<std::string> values;
  // The value is the session default, not `values`: always with reset, and with local for
  // `SET LOCAL search_path TO DEFAULT` (set_config(..., NULL, true) likewise).
  bool to_default = false;
};

enum class TxnControl : uint8_t {
  none, begin, commit, rollback, savepoint, release, rollback_to, prepare,
  commit_prepared, rollback_prepared,   // COMMIT PREPARED / ROLLBACK PREPARED 'gid': `savepoint` holds the gid
};

// A relation whose shape the statement creates or changes: once the transaction commits, predrop
// captures the "after" (capture/ writes it as post_create or post_alter, paired with its "before").
struct ShapeChange {
  enum class Kind : uint8_t {
    create,   // CREATE TABLE (… LIKE …, PARTITION OF …), CREATE TABLE AS, SELECT INTO, CREATE MATERIALIZED VIEW
    alter,    // ALTER TABLE ADD / DROP / ALTER COLUMN TYPE, RENAME COLUMN, RENAME TO, SET SCHEMA; REFRESH MATERIALIZED VIEW
  };
  Kind kind = Kind::create;
  // The name the relation has once the statement has run: RENAME TO and SET SCHEMA give the new
  // one. schema empty: unqualified (CREATE puts it in the first schema of the path that exists).
  RelationName relation;
  bool operator==(const ShapeChange&) const = default;
};

// An object whose DROP a table kept in quarantine can block although the table's own DROP let
// the object go, because the quarantine cannot detach it from the table (issue 22): the owner
// (DROP ROLE), a tablespace, a table access method, a partition key's operator class or family, an
// extension's type. The hold purges the quarantined tables that use it before the statement runs.
struct YieldTarget {
  enum class Kind : uint8_t { role, tablespace, access_method, operator_class, operator_family, extension };
  Kind kind = Kind::role;
  std::string name;     // as the server reads it (folded unless quoted)
  std::string schema;   // operator class / family: the schema it was qualified with, else empty
  std::string method;   // operator class / family: USING method
};
// The metric label and the ledger's word for each kind: "drop_role", "drop_tablespace", …
std::string_view to_string(YieldTarget::Kind kind);

// One top-level statement of the message text.
struct Statement {
  std::vector<Target> targets;                  // empty when it destroys nothing visible
  std::optional<SettingChange> search_path;  // SET/RESET search_path, set_config('search_path', …)
  // SET [LOCAL] ROLE, RESET ROLE, set_config('role', …); SET SESSION AUTHORIZATION and its RESET
  // (which also end a SET ROLE), set_config('session_authorization', …); DISCARD ALL. RESET ALL
  // touches neither (both are GUC_NO_RESET_ALL on the server).
  std::optional<SettingChange> role;
  std::optional<SettingChange> session_authorization;
  TxnControl txn = TxnControl::none;
  std::string savepoint;                        // savepoint / release / rollback_to: the savepoint name
  bool unresolved_risk = false;                 // DO, EXECUTE, CALL, a function that may DROP: cannot be seen
  bool temporary = false;                       // targets only temporary objects (ignored by design)
  // The parser rejects it and its targets cannot be read from its tokens, yet it holds a keyword
  // of the prefilter's (DROP, ALTER, TRUNCATE, DO …): the ledger gets an `unparsed` row.
  bool unparsed = false;
  // Shape changes, reported only when classify() was asked for them (a temporary relation never is).
  std::vector<ShapeChange> changes;
  std::vector<YieldTarget> yields;              // what it drops that a quarantined table may still use
  // Where the statement is in the text (bytes; libpg_query's stmt_location / stmt_len), so that a
  // quarantine can substitute it alone. Unknown (has_span false) for texts the parser rejects.
  uint32_t text_begin = 0, text_length = 0;
  bool has_span = false;
};

struct Facts {
  std::vector<Statement> statements;
  // libpg_query rejected the whole text. The statements then come from the scanner fallback
  // (fallback.cpp): the text split with libpg_query's scanner, each statement parsed alone, and
  // a statement that still does not parse read from its tokens (DROP/TRUNCATE/ALTER TABLE name
  // lists) or marked unparsed. Their indexes are the text's statements as the scanner splits them.
  bool parse_error = false;
  std::string error_message;       // the parser's message for the whole text
  std::string fingerprint;         // set when anything is destructive, unresolved or unparsed: pg_query_fingerprint
                                   // hex, or for a text the parser rejects a hash of its tokens (literals left out)
  std::string normalized;          // pg_query_normalize, then every leftover literal replaced by $n and comments
                                   // dropped: what the ledger stores; never holds a literal or a password. For a
                                   // text the parser rejects: every literal and number replaced on its tokens
  // The text itself, kept only when it destroys something: a quarantine runs it inside its
  // substitute (proxy/quarantine.cpp). Never logged or stored: it may hold literals.
  std::string source;

  bool destroys() const;           // any statement has targets
  bool unresolved() const;         // any statement is unresolved risk
  bool unparsed() const;           // any statement is unparsed
  bool touches_search_path() const;  // any statement moves search_path, or the role "$user" names
  bool changes_shape() const;      // any statement has changes
  bool yields() const;             // any statement has yields
  // What the proxy holds or records (it destroys, is unresolved or unparsed, changes a shape or
  // yields): such a text, and no other, carries a fingerprint for its ledger or after row. Both
  // the classifier and its scanner fallback decide by this one rule.
  bool recorded() const;
};

// Cheap and sound: false only when the text cannot hold any statement the classifier
// reports (destructive, search_path, unresolved). Case-insensitive keyword scan, no allocation.
// Transaction control alone (BEGIN, COMMIT, SAVEPOINT …) is NOT a reason to pass: take
// transaction state from ReadyForQuery and CommandComplete tags; txn facts are reported only
// for texts that pass for another reason. Keyword list and soundness argument: prefilter.cpp.
// shape_changes: also pass what creates or changes a table's shape (CREATE, SELECT … INTO, REFRESH)
// and the transaction control that decides whether such a change commits (SAVEPOINT, ROLLBACK,
// RELEASE, PREPARE / COMMIT PREPARED): what the "after" capture needs.
bool may_matter(std::string_view sql, bool shape_changes = false);

struct ClassifierStats {
  uint64_t prefiltered = 0;   // never parsed: may_matter() said no
  uint64_t parsed = 0;        // full parse (cache miss)
  uint64_t cache_hit = 0;
  uint64_t parse_error = 0;   // libpg_query rejected the whole text (the scanner fallback classified it)
};

// Parse cache keyed by statement text (LRU, bounded by entry count). Thread-safe.
class Classifier {
 public:
  explicit Classifier(size_t cache_entries = 4096);
  ~Classifier();
  Classifier(const Classifier&) = delete;
  Classifier& operator=(const Classifier&) = delete;

  // nullptr when the prefilter proves the text irrelevant (the hot path: no parse, no allocation).
  // standard_conforming_strings: the session's setting (the server reports it in ParameterStatus);
  // with it off a backslash escapes inside '…', which changes where statements end.
  // shape_changes: the prefilter also passes shape changes and transaction control (may_matter), and
  // the facts report them. Facts are cached per text and flag: the same text gives the same facts.
  std::shared_ptr<const Facts> classify(std::string_view sql, bool standard_conforming_strings = true,
                                        bool shape_changes = false);
  ClassifierStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Parse without prefilter or cache (tests, CLI, fuzzing). Reads up to the first NUL byte.
// Decisions (DO is always unresolved, SELECT f() never is, …) are listed in classify.cpp.
Facts classify_uncached(std::string_view sql, bool standard_conforming_strings = true, bool shape_changes = false);

// Splits a search_path value ("a, \"B\", $user") into schema tokens as the server does.
// A malformed value (the server would reject it) gives an empty vector.
std::vector<std::string> split_search_path(std::string_view value);
// Same, but nullopt when the server would reject the value (unbalanced quote, empty element).
std::optional<std::vector<std::string>> parse_search_path(std::string_view value);

// The session's effective search_path, following the server's rules for SET, SET LOCAL,
// RESET and transaction end, and the role its "$user" names (SET ROLE, SET SESSION AUTHORIZATION,
// with the same rules). Pure logic: the proxy feeds it what it sees on the wire.
class SearchPathTracker {
 public:
  // The value at session start: role/database defaults or the startup packet's options; the role
  // the startup's options set (-c role=…), if any.
  explicit SearchPathTracker(std::vector<std::string> initial = {"$user", "public"},
                             std::optional<std::string> initial_role = std::nullopt);
  SearchPathTracker(const SearchPathTracker& other);
  SearchPathTracker& operator=(const SearchPathTracker& other);
  SearchPathTracker(SearchPathTracker&&) noexcept = default;
  SearchPathTracker& operator=(SearchPathTracker&&) noexcept = default;
  ~SearchPathTracker();
  // A statement that the server ran successfully (the proxy calls it on CommandComplete order).
  // SET LOCAL outside a transaction block has no lasting effect (the server warns and drops it);
  // a multi-statement simple Query runs as one implicit block, so pass true for it and call
  // end_transaction() when it completes.
  void apply(const SettingChange& change, bool in_transaction_block);
  void apply_role(const SettingChange& change, bool in_transaction_block);
  void apply_session_authorization(const SettingChange& change, bool in_transaction_block);
  // Transaction ended: committed or rolled back (ReadyForQuery went back to 'I').
  // PREPARE TRANSACTION counts as committed for settings (the server does the same).
  void end_transaction(bool committed);
  // Subtransactions: ROLLBACK TO undoes SETs made after the savepoint, RELEASE keeps them.
  // Unknown names are ignored (the server rejects the statement).
  void savepoint(std::string_view name);
  void release_savepoint(std::string_view name);
  void rollback_to_savepoint(std::string_view name);
  // Schemas to search, in order, with "$user" replaced by the current user and pg_temp dropped
  // (temporary tables are out of scope) and later duplicates skipped, as the server does;
  // pg_catalog is not added. The current user is login_user unless SET ROLE or SET SESSION
  // AUTHORIZATION named another.
  std::vector<std::string> effective(std::string_view login_user) const;
  const std::vector<std::string>& current() const;
  // current() with "$user" written out as the role SET ROLE or SET SESSION AUTHORIZATION made
  // current; current() itself while the login user is (its callers know that user).
  std::vector<std::string> current_for_role() const;

 private:
  // What the open transaction did to a setting: all a savepoint keeps (usually nothing, so a
  // SAVEPOINT copies no vector).
  struct InTransaction {
    std::optional<std::vector<std::string>> txn;  // session-level SET inside the open transaction
    std::optional<std::vector<std::string>> local;
  };
  // One setting through the GUC stack of guc.c.
  struct Setting {
    std::vector<std::string> session;  // committed session value
    InTransaction open;
    std::vector<std::string> initial;
    void apply(const SettingChange& change, bool in_transaction_block);
    void end_transaction(bool committed);
    const std::vector<std::string>& current() const {
      return open.local ? *open.local : open.txn ? *open.txn : session;
    }
  };
  void apply_to(Setting& setting, const SettingChange& change, bool in_transaction_block);
  // The role "$user" names when not the login user's; nullopt: the login user.
  std::optional<std::string> role_in_force() const;

  // Every session has a tracker and few ever change role, so the role settings live apart, made by
  // the first SET ROLE or SET SESSION AUTHORIZATION (or a startup role): idle sessions stay small.
  struct Roles {
    Setting role, session_authorization;
  };
  Roles& roles();

  Setting path_;
  std::unique_ptr<Roles> roles_;
  struct Savepoint {
    std::string name;
    InTransaction path, role, session_authorization;
  };
  std::vector<Savepoint> savepoints_;
};

}  // namespace predrop::parser
