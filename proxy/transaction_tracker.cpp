#include "proxy/transaction_tracker.hpp"

#include <algorithm>

namespace predrop::proxy {

namespace {

const HeldTable* find_held(const std::vector<HeldTable>& held, const parser::RelationName& name) {
  for (auto it = held.rbegin(); it != held.rend(); ++it)
    if (it->table == name.name && (name.schema.empty() || it->schema == name.schema)) return &*it;
  return nullptr;
}

// An earlier transaction's DROP that a CREATE of `name` recreates: unqualified, only a table of a
// schema on the session's path now (where the CREATE can have put it; "$user" is `user`'s schema).
std::vector<HeldTable>::const_iterator find_recreated(const std::vector<HeldTable>& dropped,
                                                     const parser::RelationName& name,
                                                     const std::vector<std::string>& path, const std::string& user) {
  auto on_path = [&](const std::string& schema) {
    return std::any_of(path.begin(), path.end(),
                       [&](const std::string& p) { return p == schema || (p == "$user" && !user.empty() && user == schema); });
  };
  for (auto it = dropped.rbegin(); it != dropped.rend(); ++it)
    if (it->table == name.name && (name.schema.empty() ? on_path(it->schema) : it->schema == name.schema))
      return std::next(it).base();
  return dropped.end();
}

}  // namespace

void TransactionTracker::completed(const parser::Statement& st, const std::shared_ptr<const parser::Facts>& facts,
                                   const std::vector<HeldTable>* held, const parser::SearchPathTracker& path) {
  using T = parser::TxnControl;
  using DK = parser::DestroyKind;
  // The j-th ALTER change of a statement is its j-th alter_table target (the parser reports both
  // for one ALTER): the hold snapshotted that target's table under its name before the change.
  std::vector<const parser::Target*> alters;
  for (const auto& t : st.targets) {
    if (t.kind == DK::alter_table) alters.push_back(&t);
    if (t.kind == DK::drop_table && held && dropped_.size() < kMaxTransactionChanges)
      if (const HeldTable* h = find_held(*held, t.relation)) dropped_.push_back({*h, std::nullopt});
  }
  size_t j = 0;
  const std::vector<std::string> path_now = st.changes.empty() ? std::vector<std::string>{} : path.current_for_role();
  for (const auto& c : st.changes) {
    if (changes_.size() >= kMaxTransactionChanges) {
      ++changes_dropped_;
      continue;
    }
    CompletedChange done{c, path_now, facts, 0, {}};
    if (c.kind == parser::ShapeChange::Kind::alter) {
      const parser::Target* target = j < alters.size() ? alters[j] : nullptr;
      ++j;
      if (target && held)
        if (const HeldTable* h = find_held(*held, target->relation)) done.oid = h->oid, done.before_id = h->snapshot_id;
    } else if (OpenDrop* d = find_open_drop(c.relation)) {
      // A recreate of what this transaction dropped. Consumed, not forgotten: a ROLLBACK TO a
      // savepoint before this CREATE gives the DROP back to the next one.
      done.before_id = d->table.snapshot_id;
      d->consumed_by = changes_.size();
    } else if (auto r = find_recreated(dropped_before_, c.relation, path_now, user_); r != dropped_before_.end()) {
      // A recreate of what an earlier transaction of this session dropped (a worker's autocommit
      // DROP, then CREATE): named here, the pair does not depend on the order in which the store
      // receives this after and the befores of other cycles (tests/after/test_churn_pairs.py).
      done.before_id = r->snapshot_id;
    }
    changes_.push_back(std::move(done));
  }
  auto last_mark = [this](const std::string& name) {
    for (size_t i = marks_.size(); i-- > 0;)
      if (marks_[i].name == name) return static_cast<std::ptrdiff_t>(i);
    return std::ptrdiff_t{-1};
  };
  switch (st.txn) {
    case T::savepoint: marks_.push_back({st.savepoint, changes_.size(), dropped_.size()}); break;
    case T::release:
      // RELEASE keeps what was done since the savepoint, and forgets it and every later one.
      if (auto i = last_mark(st.savepoint); i >= 0) marks_.resize(static_cast<size_t>(i));
      break;
    case T::rollback_to:
      // ROLLBACK TO undoes what was done since the savepoint (the DROPs, and the CREATEs that
      // consumed earlier ones) and keeps the savepoint itself.
      if (auto i = last_mark(st.savepoint); i >= 0) {
        const Mark& m = marks_[static_cast<size_t>(i)];
        changes_.resize(m.changes);
        dropped_.resize(m.drops);
        for (auto& d : dropped_)
          if (d.consumed_by && *d.consumed_by >= m.changes) d.consumed_by.reset();
        marks_.resize(static_cast<size_t>(i) + 1);
      }
      break;
    // COMMIT and ROLLBACK are read from their tags (on_backend 'C'): a bare COMMIT never passes the
    // prefilter, and the COMMIT of a failed transaction says ROLLBACK.
    case T::prepare:
      prepared_gid_ = st.savepoint;
      if (!changes_.empty()) outcomes_.prepared.emplace_back(st.savepoint, std::move(changes_));
      forget_open();
      break;
    case T::commit_prepared: outcomes_.finished_prepared.emplace_back(st.savepoint, true); break;
    case T::rollback_prepared: outcomes_.finished_prepared.emplace_back(st.savepoint, false); break;
    default: break;
  }
}

void TransactionTracker::ended(bool committed) {
  if (committed) {
    // A committed CREATE consumes the earlier DROP it recreates; this transaction's DROPs that no
    // CREATE of it recreated are the ones later CREATEs recreate.
    for (auto& c : changes_) {
      if (c.change.kind == parser::ShapeChange::Kind::create)
        if (auto r = find_recreated(dropped_before_, c.change.relation, c.search_path, user_); r != dropped_before_.end())
          dropped_before_.erase(r);
      outcomes_.committed.push_back(std::move(c));
    }
    for (auto& d : dropped_) {
      if (d.consumed_by) continue;
      std::erase_if(dropped_before_, [&](const HeldTable& h) { return h.schema == d.table.schema && h.table == d.table.table; });
      if (dropped_before_.size() >= kRememberedDrops) dropped_before_.erase(dropped_before_.begin());
      dropped_before_.push_back(std::move(d.table));
    }
  }
  forget_open();
}

TransactionTracker::OpenDrop* TransactionTracker::find_open_drop(const parser::RelationName& name) {
  for (auto it = dropped_.rbegin(); it != dropped_.rend(); ++it)
    if (!it->consumed_by && it->table.table == name.name && (name.schema.empty() || it->table.schema == name.schema))
      return &*it;
  return nullptr;
}

void TransactionTracker::forget_open() {
  changes_.clear();
  marks_.clear();
  dropped_.clear();
}

}  // namespace predrop::proxy
