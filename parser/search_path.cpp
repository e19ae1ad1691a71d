// search_path values and the session's effective path. Pure logic mirroring the server:
// SplitIdentifierString() for values, and the GUC stack rules of guc.c for SET / SET LOCAL /
// RESET across transactions and subtransactions.
#include "parser/parser.hpp"
#include "parser/identifiers.hpp"

#include <algorithm>

namespace predrop::parser {
namespace {

// scanner_isspace(): the only bytes the server treats as whitespace here.
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }

}  // namespace

std::optional<std::vector<std::string>> parse_search_path(std::string_view value) {
  std::vector<std::string> out;
  size_t i = 0;
  const size_t n = value.size();
  while (i < n && is_space(value[i])) ++i;
  if (i == n) return out;  // an empty value is allowed: an empty path
  for (;;) {
    std::string name;
    if (value[i] == '"') {
      // Quoted: "" stands for one quote, no case folding, must be closed.
      ++i;
      for (;;) {
        if (i >= n) return std::nullopt;
        if (value[i] == '"') {
          if (i + 1 < n && value[i + 1] == '"') {
            name.push_back('"');
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        name.push_back(value[i++]);
      }
    } else {
      // Unquoted: runs to the separator or whitespace, folded like an identifier.
      const size_t start = i;
      while (i < n && value[i] != ',' && !is_space(value[i])) ++i;
      if (i == start) return std::nullopt;  // empty unquoted element
      name = fold_identifier(value.substr(start, i - start));
    }
    while (i < n && is_space(value[i])) ++i;
    out.push_back(truncate_identifier(std::move(name)));
    if (i == n) return out;
    if (value[i] != ',') return std::nullopt;  // junk after a name
    ++i;
    while (i < n && is_space(value[i])) ++i;
    if (i == n) return std::nullopt;  // trailing separator: empty element
  }
}

std::vector<std::string> split_search_path(std::string_view value) {
  auto parsed = parse_search_path(value);
  return parsed ? std::move(*parsed) : std::vector<std::string>{};
}

SearchPathTracker::SearchPathTracker(std::vector<std::string> initial, std::optional<std::string> initial_role) {
  path_.session = path_.initial = std::move(initial);
  if (initial_role && *initial_role != "none") roles().role.session = roles().role.initial = {std::move(*initial_role)};
}

SearchPathTracker::SearchPathTracker(const SearchPathTracker& other)
    : path_(other.path_),
      roles_(other.roles_ ? std::make_unique<Roles>(*other.roles_) : nullptr),
      savepoints_(other.savepoints_) {}

SearchPathTracker& SearchPathTracker::operator=(const SearchPathTracker& other) {
  if (this != &other) *this = SearchPathTracker(other);
  return *this;
}

SearchPathTracker::~SearchPathTracker() = default;

SearchPathTracker::Roles& SearchPathTracker::roles() {
  if (!roles_) roles_ = std::make_unique<Roles>();
  return *roles_;
}

// guc.c semantics in short: a session-level SET (or RESET) inside a transaction block is undone
// by ROLLBACK and kept by COMMIT, and it overrides an earlier SET LOCAL of the same transaction;
// SET LOCAL lasts until the transaction ends, whatever the outcome.
void SearchPathTracker::Setting::apply(const SettingChange& change, bool in_transaction_block) {
  const bool to_default = change.to_default || change.scope == SettingChange::Scope::reset;
  std::vector<std::string> value = to_default ? initial : change.values;
  if (change.scope == SettingChange::Scope::local) {
    if (in_transaction_block) open.local = std::move(value);
    return;  // outside a block the server warns and the setting dies with the implicit transaction
  }
  if (in_transaction_block) {
    open.txn = std::move(value);
    open.local.reset();
  } else {
    session = std::move(value);
    open = {};
  }
}

void SearchPathTracker::Setting::end_transaction(bool committed) {
  if (committed && open.txn) session = std::move(*open.txn);
  open = {};
}

void SearchPathTracker::apply_to(Setting& setting, const SettingChange& change, bool in_transaction_block) {
  setting.apply(change, in_transaction_block);
  if (!in_transaction_block && change.scope != SettingChange::Scope::local) savepoints_.clear();
}

void SearchPathTracker::apply(const SettingChange& change, bool in_transaction_block) {
  apply_to(path_, change, in_transaction_block);
}

void SearchPathTracker::apply_role(const SettingChange& change, bool in_transaction_block) {
  apply_to(roles().role, change, in_transaction_block);
}

void SearchPathTracker::apply_session_authorization(const SettingChange& change, bool in_transaction_block) {
  apply_to(roles().session_authorization, change, in_transaction_block);
}

void SearchPathTracker::end_transaction(bool committed) {
  path_.end_transaction(committed);
  if (roles_) {
    roles_->role.end_transaction(committed);
    roles_->session_authorization.end_transaction(committed);
  }
  savepoints_.clear();
}

void SearchPathTracker::savepoint(std::string_view name) {
  savepoints_.push_back(Savepoint{std::string(name), path_.open,
                                  roles_ ? roles_->role.open : InTransaction{},
                                  roles_ ? roles_->session_authorization.open : InTransaction{}});
}

// Savepoint names may repeat; the server picks the most recent one.
void SearchPathTracker::release_savepoint(std::string_view name) {
  auto it = std::find_if(savepoints_.rbegin(), savepoints_.rend(),
                         [&](const Savepoint& s) { return s.name == name; });
  if (it == savepoints_.rend()) return;
  savepoints_.erase(std::next(it).base(), savepoints_.end());  // values stay as they are
}

void SearchPathTracker::rollback_to_savepoint(std::string_view name) {
  auto it = std::find_if(savepoints_.rbegin(), savepoints_.rend(),
                         [&](const Savepoint& s) { return s.name == name; });
  if (it == savepoints_.rend()) return;
  path_.open = it->path;
  if (roles_) {
    roles_->role.open = it->role;
    roles_->session_authorization.open = it->session_authorization;
  }
  savepoints_.erase(it.base(), savepoints_.end());  // the savepoint itself survives ROLLBACK TO
}

const std::vector<std::string>& SearchPathTracker::current() const { return path_.current(); }

// GetUserId() on the server: the role SET ROLE made current, else the session user, which SET
// SESSION AUTHORIZATION sets (a role name "none" is the server's word for no role).
std::optional<std::string> SearchPathTracker::role_in_force() const {
  if (!roles_) return std::nullopt;
  if (const auto& role = roles_->role.current(); !role.empty() && role.front() != "none") return role.front();
  if (const auto& user = roles_->session_authorization.current(); !user.empty()) return user.front();
  return std::nullopt;
}

std::vector<std::string> SearchPathTracker::effective(std::string_view login_user) const {
  const std::optional<std::string> role = role_in_force();
  const std::string_view user = role ? std::string_view(*role) : login_user;
  std::vector<std::string> out;
  for (const auto& schema : current()) {
    if (schema == "pg_temp") continue;  // temporary tables are out of scope
    std::string name = schema == "$user" ? std::string(user) : schema;
    // "$user": whether a schema of that name exists is the caller's question.
    if (name.empty() && schema == "$user") continue;
    // The server skips a schema already in the list.
    if (std::find(out.begin(), out.end(), name) != out.end()) continue;
    out.push_back(std::move(name));
  }
  return out;
}

std::vector<std::string> SearchPathTracker::current_for_role() const {
  std::vector<std::string> out = current();
  if (const std::optional<std::string> role = role_in_force())
    for (auto& schema : out)
      if (schema == "$user") schema = *role;
  return out;
}

}  // namespace predrop::parser
