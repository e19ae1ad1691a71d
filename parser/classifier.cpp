// Classifier: the prefilter in front of a bounded LRU cache of parse results.
// Applications send the same few statement texts over and over (ORMs, migrations retried,
// prepared statements re-parsed), so the cache turns the 2-100 µs parse into a map lookup.
// The lock is never held while parsing: two threads may parse the same text at once, and the
// second insert simply finds the first one's entry.
#include "parser/parser.hpp"

#include <atomic>
#include <list>
#include <mutex>
#include <unordered_map>

namespace predrop::parser {

namespace {

// Texts longer than this are classified but not cached: one huge INSERT … VALUES that happens
// to contain a keyword must not pin megabytes in the cache.
constexpr size_t kMaxCachedTextBytes = 64 * 1024;

}  // namespace

bool Facts::destroys() const {
  for (const auto& s : statements)
    if (!s.targets.empty()) return true;
  return false;
}

bool Facts::unresolved() const {
  for (const auto& s : statements)
    if (s.unresolved_risk) return true;
  return false;
}

bool Facts::unparsed() const {
  for (const auto& s : statements)
    if (s.unparsed) return true;
  return false;
}

bool Facts::touches_search_path() const {
  for (const auto& s : statements)
    if (s.search_path || s.role || s.session_authorization) return true;
  return false;
}

bool Facts::changes_shape() const {
  for (const auto& s : statements)
    if (!s.changes.empty()) return true;
  return false;
}

bool Facts::yields() const {
  for (const auto& s : statements)
    if (!s.yields.empty()) return true;
  return false;
}

bool Facts::recorded() const { return destroys() || unresolved() || unparsed() || changes_shape() || yields(); }

std::string_view to_string(YieldTarget::Kind kind) {
  switch (kind) {
    case YieldTarget::Kind::role: return "drop_role";
    case YieldTarget::Kind::tablespace: return "drop_tablespace";
    case YieldTarget::Kind::access_method: return "drop_access_method";
    case YieldTarget::Kind::operator_class: return "drop_operator_class";
    case YieldTarget::Kind::operator_family: return "drop_operator_family";
    case YieldTarget::Kind::extension: return "drop_extension";
  }
  return "unknown";
}

struct Classifier::Impl {
  using Entry = std::pair<std::string, std::shared_ptr<const Facts>>;
  using Lru = std::list<Entry>;  // front = most recently used

  explicit Impl(size_t capacity) : capacity(capacity) {}

  const size_t capacity;
  std::mutex mu;
  Lru lru;
  // Keys view the strings owned by the list nodes, which never move.
  std::unordered_map<std::string_view, Lru::iterator> index;

  std::atomic<uint64_t> prefiltered{0};
  std::atomic<uint64_t> parsed{0};
  std::atomic<uint64_t> cache_hit{0};
  std::atomic<uint64_t> parse_error{0};

  std::shared_ptr<const Facts> lookup(std::string_view sql) {
    std::lock_guard lock(mu);
    auto it = index.find(sql);
    if (it == index.end()) return nullptr;
    lru.splice(lru.begin(), lru, it->second);
    return it->second->second;
  }

  std::shared_ptr<const Facts> insert(std::string_view sql, std::shared_ptr<const Facts> facts) {
    std::lock_guard lock(mu);
    if (auto it = index.find(sql); it != index.end()) {  // another thread was first
      lru.splice(lru.begin(), lru, it->second);
      return it->second->second;
    }
    lru.emplace_front(std::string(sql), std::move(facts));
    index.emplace(std::string_view(lru.front().first), lru.begin());
    while (lru.size() > capacity) {
      index.erase(std::string_view(lru.back().first));
      lru.pop_back();
    }
    return lru.front().second;
  }
};

Classifier::Classifier(size_t cache_entries) : impl_(std::make_unique<Impl>(cache_entries)) {}
Classifier::~Classifier() = default;

std::shared_ptr<const Facts> Classifier::classify(std::string_view sql, bool standard_conforming_strings,
                                                  bool shape_changes) {
  Impl& im = *impl_;
  if (!may_matter(sql, shape_changes)) {
    im.prefiltered.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  // A session with standard_conforming_strings off lexes the same text differently, and shape
  // mode reports more: those entries are keyed apart, behind a NUL byte and a byte naming the
  // flags. The default session's key is the bare text, so the common case allocates nothing; a
  // text that itself begins with NUL is flagged too, so that no bare key looks like a flagged one.
  std::string flagged_key;
  std::string_view key = sql;
  if (!standard_conforming_strings || shape_changes || (!sql.empty() && sql[0] == '\0')) {
    flagged_key.reserve(sql.size() + 2);
    flagged_key.push_back('\0');
    flagged_key.push_back(static_cast<char>('0' + (standard_conforming_strings ? 0 : 1) + (shape_changes ? 2 : 0)));
    flagged_key.append(sql);
    key = flagged_key;
  }
  const bool cacheable = im.capacity > 0 && sql.size() <= kMaxCachedTextBytes;
  if (cacheable) {
    if (auto hit = im.lookup(key)) {
      im.cache_hit.fetch_add(1, std::memory_order_relaxed);
      return hit;
    }
  }
  auto facts = std::make_shared<const Facts>(classify_uncached(sql, standard_conforming_strings, shape_changes));
  im.parsed.fetch_add(1, std::memory_order_relaxed);
  if (facts->parse_error) im.parse_error.fetch_add(1, std::memory_order_relaxed);
  if (!cacheable) return facts;
  return im.insert(key, std::move(facts));
}

ClassifierStats Classifier::stats() const {
  const Impl& im = *impl_;
  return ClassifierStats{
      im.prefiltered.load(std::memory_order_relaxed),
      im.parsed.load(std::memory_order_relaxed),
      im.cache_hit.load(std::memory_order_relaxed),
      im.parse_error.load(std::memory_order_relaxed),
  };
}

}  // namespace predrop::parser
