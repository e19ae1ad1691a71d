#include "policy/keys.hpp"

#include "policy/glob.hpp"
#include "policy/key_builders.hpp"
#include "policy/suggest.hpp"

namespace predrop::policy::detail {

namespace {

constexpr auto sighup = ReloadBehaviour::sighup;
constexpr auto restart = ReloadBehaviour::restart;

const std::vector<std::string> kTlsVersions = {"1.2", "1.3"};
const std::vector<std::string> kSslModes = {"disable", "prefer", "require", "verify-ca", "verify-full"};
const std::vector<std::string> kLogFormats = {"text", "json"};
const std::vector<std::string> kLogLevels = {"trace", "debug", "info", "warn", "error", "critical", "off"};
// Same order as the Action and OnFailure enums.
const std::vector<std::string> kActions = {"snapshot", "skip", "quarantine"};
const std::vector<std::string> kOnFailure = {"open", "closed"};

constexpr long long kMiB = 1 << 20;
constexpr long long kGiB = 1 << 30;
constexpr long long kHourMs = 3600LL * 1000;

std::string non_empty_item(std::string_view item) {
  return item.empty() ? std::string("entries must not be empty") : std::string();
}

// baseline.exclude: "schema.table", either part a glob ("schema.*").
std::string check_exclude_glob(std::string_view item) {
  auto dot = item.find('.');
  if (dot == std::string_view::npos || item.find('.', dot + 1) != std::string_view::npos || dot == 0 ||
      dot + 1 == item.size())
    return "'" + std::string(item) + "' is not schema.table (a glob on each side, e.g. audit.* or *.tmp_?)";
  for (auto part : {item.substr(0, dot), item.substr(dot + 1)}) {
    std::string err = glob_syntax_error(part);
    if (!err.empty()) return "glob " + err;
  }
  return {};
}

template <class Access>
ConfigKey path_key(std::string name, Access access, ReloadBehaviour reload) {
  auto k = string_key<Config>(std::move(name), access, reload);
  k.type = "a file path";
  k.path = true;
  return k;
}

template <class Access>
ConfigKey secret_key(std::string name, Access access) {
  auto k = string_key<Config>(std::move(name), access, restart);
  k.type = "a libpq conninfo";
  k.secret = true;
  return k;
}

// Seconds, written as an integer or with a unit ("7d", "36h"); shown with the largest exact unit.
template <class Access>
ConfigKey duration_key(std::string name, Access access, long long lo, long long hi) {
  ConfigKey k;
  k.name = std::move(name);
  k.type = "a duration (7d, 36h, 90m, 30s or seconds)";
  k.reload = sighup;
  k.set = [access, lo, hi](Config& c, std::string_view text) -> std::string {
    auto v = parse_duration_s(text);
    if (!v) return "expected a duration like 7d, 36h, 90m, 30s or an integer of seconds, got '" + std::string(text) + "'";
    if (*v < lo || *v > hi)
      return "must be between " + format_duration_s(lo) + " and " + format_duration_s(hi) + ", got " + std::string(text);
    access(c) = *v;
    return {};
  };
  k.get = [access](const Config& c) { return format_duration_s(access(c)); };
  k.copy = [access](Config& dst, const Config& src) { access(dst) = access(src); };
  return k;
}

// Bytes, written as an integer or with a 1024-based unit ("10GB"); 0 is no cap.
template <class Access>
ConfigKey size_key(std::string name, Access access) {
  ConfigKey k;
  k.name = std::move(name);
  k.type = "a size (10GB, 512MB or bytes; 0 = no cap)";
  k.reload = sighup;
  k.set = [access](Config& c, std::string_view text) -> std::string {
    auto v = parse_size_bytes(text);
    if (!v) return "expected a size like 10GB, 512MB, 64kB or an integer of bytes, got '" + std::string(text) + "'";
    access(c) = *v;
    return {};
  };
  k.get = [access](const Config& c) { return std::to_string(access(c)); };
  k.copy = [access](Config& dst, const Config& src) { access(dst) = access(src); };
  return k;
}

std::vector<ConfigKey> build_config_keys() {
  std::vector<ConfigKey> k;
  k.push_back(endpoint_key<Config>("listen", [](auto& c) -> auto& { return c.listen; }, restart));
  k.push_back(endpoint_key<Config>("upstream", [](auto& c) -> auto& { return c.upstream; }, restart));
  k.push_back(admin_endpoint_key<Config>("admin", [](auto& c) -> auto& { return c.admin; }, restart));
  k.push_back(int_key<Config>("threads", [](auto& c) -> auto& { return c.threads; }, 0, 1024, restart));

  k.push_back(path_key("tls.cert_file", [](auto& c) -> auto& { return c.tls.cert_file; }, restart));
  k.push_back(path_key("tls.key_file", [](auto& c) -> auto& { return c.tls.key_file; }, restart));
  k.push_back(word_key<Config>("tls.min_version", [](auto& c) -> auto& { return c.tls.min_version; }, kTlsVersions,
                               restart));
  k.push_back(word_key<Config>("tls.max_version", [](auto& c) -> auto& { return c.tls.max_version; }, kTlsVersions,
                               restart));
  k.push_back(string_key<Config>("tls.ciphers", [](auto& c) -> auto& { return c.tls.ciphers; }, restart));
  k.push_back(string_key<Config>("tls.ciphersuites", [](auto& c) -> auto& { return c.tls.ciphersuites; }, restart));

  k.push_back(word_key<Config>("upstream_tls.sslmode", [](auto& c) -> auto& { return c.upstream_tls.sslmode; },
                               kSslModes, restart));
  k.push_back(path_key("upstream_tls.root_cert", [](auto& c) -> auto& { return c.upstream_tls.root_cert; }, restart));
  k.push_back(string_key<Config>("upstream_tls.server_name",
                                 [](auto& c) -> auto& { return c.upstream_tls.server_name; }, restart));
  k.push_back(word_key<Config>("upstream_tls.min_version",
                               [](auto& c) -> auto& { return c.upstream_tls.min_version; }, kTlsVersions, restart));
  k.push_back(word_key<Config>("upstream_tls.max_version",
                               [](auto& c) -> auto& { return c.upstream_tls.max_version; }, kTlsVersions, restart));
  k.push_back(string_key<Config>("upstream_tls.ciphers", [](auto& c) -> auto& { return c.upstream_tls.ciphers; },
                                 restart));
  k.push_back(string_key<Config>("upstream_tls.ciphersuites",
                                 [](auto& c) -> auto& { return c.upstream_tls.ciphersuites; }, restart));

  k.push_back(int_key<Config>("limits.max_clients", [](auto& c) -> auto& { return c.limits.max_clients; }, 1,
                              1000000, restart));
  k.push_back(int_key<Config>("limits.max_message_bytes", [](auto& c) -> auto& { return c.limits.max_message_bytes; },
                              1024, kGiB, restart));
  k.push_back(int_key<Config>("limits.max_inspect_bytes", [](auto& c) -> auto& { return c.limits.max_inspect_bytes; },
                              1024, kGiB, restart));
  k.push_back(int_key<Config>("limits.startup_timeout_ms",
                              [](auto& c) -> auto& { return c.limits.startup_timeout_ms; }, 1, kHourMs, restart));
  k.push_back(int_key<Config>("limits.drain_timeout_ms", [](auto& c) -> auto& { return c.limits.drain_timeout_ms; },
                              1, kHourMs, restart));
  k.push_back(int_key<Config>("limits.buffer_bytes", [](auto& c) -> auto& { return c.limits.buffer_bytes; }, 1024,
                              16 * kMiB, restart));

  k.push_back(word_key<Config>("logging.format", [](auto& c) -> auto& { return c.logging.format; }, kLogFormats,
                               restart));
  k.push_back(word_key<Config>("logging.level", [](auto& c) -> auto& { return c.logging.level; }, kLogLevels, sighup));

  k.push_back(bool_key<Config>("snapshots.enabled", [](auto& c) -> auto& { return c.snapshots_enabled; }, sighup));
  k.push_back(int_key<Config>("snapshots.hold_timeout_ms", [](auto& c) -> auto& { return c.hold_timeout_ms; }, 1,
                              kHourMs, sighup));
  k.push_back(int_key<Config>("snapshots.dedup_window_s", [](auto& c) -> auto& { return c.dedup_window_s; }, 0,
                              30LL * 86400, sighup));
  k.push_back(bool_key<Config>("snapshots.naive_array_split", [](auto& c) -> auto& { return c.naive_array_split; },
                               sighup));
  k.push_back(list_key<Config>("snapshots.hash_excluded", [](auto& c) -> auto& { return c.hash_excluded; }, sighup,
                               non_empty_item));
  k.push_back(int_key<Config>("snapshots.profile.max_values", [](auto& c) -> auto& { return c.profile_max_values; },
                              0, 10000, sighup));
  k.push_back(int_key<Config>("snapshots.profile.max_value_chars",
                              [](auto& c) -> auto& { return c.profile_max_value_chars; }, 1, 100000, sighup));
  k.push_back(int_key<Config>("snapshots.profile.max_columns",
                              [](auto& c) -> auto& { return c.profile_max_columns; }, 1, 1600, sighup));

  k.push_back(secret_key("capture.conninfo", [](auto& c) -> auto& { return c.capture_conninfo; }));
  k.push_back(path_key("capture.conninfo_file", [](auto& c) -> auto& { return c.capture_conninfo_file; }, restart));
  k.push_back(int_key<Config>("capture.pool_size", [](auto& c) -> auto& { return c.capture_pool_size; }, 1, 64,
                              restart));
  k.push_back(int_key<Config>("capture.idle_close_s", [](auto& c) -> auto& { return c.capture_idle_close_s; }, 0,
                              86400, restart));
  k.push_back(bool_key<Config>("capture.after", [](auto& c) -> auto& { return c.after_capture; }, sighup));
  k.push_back(int_key<Config>("capture.after_delay_ms", [](auto& c) -> auto& { return c.after_delay_ms; }, 0, 60000,
                              restart));
  k.push_back(bool_key<Config>("capture.analyze_after_create",
                               [](auto& c) -> auto& { return c.analyze_after_create; }, sighup));
  k.push_back(int_key<Config>("capture.stats_horizon_s", [](auto& c) -> auto& { return c.stats_horizon_s; }, 0,
                              30LL * 86400, sighup));
  k.push_back(int_key<Config>("capture.stats_poll_ms", [](auto& c) -> auto& { return c.stats_poll_ms; }, 100,
                              kHourMs, restart));
  k.push_back(int_key<Config>("capture.stats_waiting_max", [](auto& c) -> auto& { return c.stats_waiting_max; }, 1,
                              1000000, restart));

  k.push_back(secret_key("store.conninfo", [](auto& c) -> auto& { return c.store_conninfo; }));
  k.push_back(path_key("store.conninfo_file", [](auto& c) -> auto& { return c.store_conninfo_file; }, restart));
  k.push_back(string_key<Config>("store.table", [](auto& c) -> auto& { return c.store_table; }, restart,
                                 check_qualified_identifier));
  k.back().nullable = false;
  k.back().type = "[schema.]table";
  k.push_back(bool_key<Config>("store.migrate_on_start", [](auto& c) -> auto& { return c.migrate_on_start; },
                               restart));
  k.push_back(int_key<Config>("store.check_interval_s", [](auto& c) -> auto& { return c.store_check_interval_s; }, 1,
                              3600, restart));
  k.push_back(duration_key("store.retention", [](auto& c) -> auto& { return c.store_retention_s; }, 0,
                           36500LL * 86400));
  k.back().reload = restart;
  k.push_back(int_key<Config>("store.prune_interval_s", [](auto& c) -> auto& { return c.store_prune_interval_s; }, 1,
                              86400, restart));

  k.push_back(string_key<Config>("enrichment.identity_sql", [](auto& c) -> auto& { return c.enrich_identity_sql; },
                                 sighup));
  k.back().type = "SQL text";
  k.push_back(string_key<Config>("enrichment.provenance_sql",
                                 [](auto& c) -> auto& { return c.enrich_provenance_sql; }, sighup));
  k.back().type = "SQL text";

  k.push_back(int_key<Config>("baseline.interval_s", [](auto& c) -> auto& { return c.baseline_interval_s; }, 0,
                              30LL * 86400, sighup));
  k.push_back(list_key<Config>("baseline.databases", [](auto& c) -> auto& { return c.baseline_databases; }, sighup,
                               non_empty_item));
  k.push_back(list_key<Config>("baseline.exclude", [](auto& c) -> auto& { return c.baseline_exclude; }, sighup,
                               check_exclude_glob));
  k.back().type = "a list of schema.table globs";
  k.push_back(int_key<Config>("baseline.batch_size", [](auto& c) -> auto& { return c.baseline_batch_size; }, 1,
                              100000, sighup));
  k.push_back(int_key<Config>("baseline.lanes", [](auto& c) -> auto& { return c.baseline_lanes; }, 1, 16, sighup));

  k.push_back(string_key<Config>("quarantine.schema", [](auto& c) -> auto& { return c.quarantine_schema; }, sighup,
                                 check_identifier));
  k.back().nullable = false;
  k.back().type = "a schema name";
  k.push_back(duration_key("quarantine.retention", [](auto& c) -> auto& { return c.quarantine_retention_s; }, 1,
                           3650LL * 86400));
  k.push_back(size_key("quarantine.max_bytes", [](auto& c) -> auto& { return c.quarantine_max_bytes; }));
  k.push_back(int_key<Config>("quarantine.max_tables", [](auto& c) -> auto& { return c.quarantine_max_tables; }, 0,
                              100000000, sighup));
  k.push_back(int_key<Config>("quarantine.purge_interval_s",
                              [](auto& c) -> auto& { return c.quarantine_purge_interval_s; }, 1, 86400, sighup));
  k.push_back(int_key<Config>("quarantine.lock_timeout_ms",
                              [](auto& c) -> auto& { return c.quarantine_lock_timeout_ms; }, 1, 60000, sighup));

  k.push_back(int_key<Config>("metrics.ages_interval_s", [](auto& c) -> auto& { return c.metrics_ages_interval_s; },
                              0, 86400, restart));

  k.push_back(string_key<Config>("console.database", [](auto& c) -> auto& { return c.console_database; }, sighup));
  k.back().type = "a database name (empty: no console)";
  k.push_back(string_key<Config>("console.role", [](auto& c) -> auto& { return c.console_role; }, sighup));
  k.back().type = "a role name";
  k.push_back(list_key<Config>("console.users", [](auto& c) -> auto& { return c.console_users; }, sighup,
                               non_empty_item));

  k.push_back(enum_key<Config>("default.action", [](auto& c) -> auto& { return c.default_rule.action; }, kActions,
                               sighup));
  k.push_back(enum_key<Config>("default.on_failure", [](auto& c) -> auto& { return c.default_rule.on_failure; },
                               kOnFailure, sighup));
  return k;
}

// database, schema, table, user, application_name: a glob (* and ?). An empty one is refused: the
// key left out is what means "any".
RuleKey glob_key(std::string name, std::string Rule::*field) {
  auto k = string_key<Rule>(std::move(name), [field](auto& r) -> auto& { return r.*field; }, sighup,
                            [](std::string_view text) {
                              std::string err = glob_syntax_error(text);
                              return err.empty() ? err : "glob " + err;
                            });
  k.type = "a glob (* and ?)";
  k.nullable = false;
  return k;
}

RuleKey client_addr_key() {
  RuleKey k;
  k.name = "client_addr";
  k.type = "an address or CIDR (10.0.0.0/8, ::1)";
  k.reload = sighup;
  k.set = [](Rule& r, std::string_view text) -> std::string {
    std::string why;
    auto net = parse_cidr(text, &why);
    if (!net) return why;
    r.client_addr = std::string(text);
    r.client_net = net;
    return {};
  };
  k.get = [](const Rule& r) { return r.client_addr; };
  k.copy = [](Rule& dst, const Rule& src) {
    dst.client_addr = src.client_addr;
    dst.client_net = src.client_net;
  };
  return k;
}

RuleKey kinds_key() {
  RuleKey k;
  k.name = "kinds";
  k.type = "a list of statement kinds";
  k.shape = Shape::list;
  k.reload = sighup;
  k.allow_empty_list = false;
  k.check_item = [](std::string_view item) -> std::string {
    if (kind_from_name(item)) return {};
    std::vector<std::string> names;
    for (int i = 0; i < kKindCount; ++i) names.emplace_back(kind_name(i));
    return "unknown kind '" + std::string(item) + "'" + did_you_mean(item, names) + "; kinds are " +
           join(names, ", ");
  };
  k.set_list = [](Rule& r, const std::vector<std::string>& items) {
    r.kinds = 0;
    r.kinds_set = true;
    for (const auto& item : items)
      if (auto i = kind_from_name(item)) r.kinds |= 1u << *i;
  };
  k.get_list = [](const Rule& r) {
    std::vector<std::string> out;
    for (int i = 0; i < kKindCount; ++i)
      if (r.kinds & (1u << i)) out.emplace_back(kind_name(i));
    return out;
  };
  k.copy = [](Rule& dst, const Rule& src) {
    dst.kinds = src.kinds;
    dst.kinds_set = src.kinds_set;
  };
  return k;
}

std::vector<RuleKey> build_rule_keys() {
  std::vector<RuleKey> k;
  k.push_back(glob_key("database", &Rule::database));
  k.push_back(glob_key("schema", &Rule::schema));
  k.push_back(glob_key("table", &Rule::table));
  k.push_back(glob_key("user", &Rule::user));
  k.push_back(glob_key("application_name", &Rule::application_name));
  k.push_back(client_addr_key());
  k.push_back(kinds_key());
  k.push_back(enum_key<Rule>("action", [](auto& r) -> auto& { return r.action; }, kActions, sighup));
  k.push_back(enum_key<Rule>("on_failure", [](auto& r) -> auto& { return r.on_failure; }, kOnFailure, sighup));
  return k;
}

}  // namespace

const std::vector<ConfigKey>& config_keys() {
  static const std::vector<ConfigKey> keys = build_config_keys();
  return keys;
}

const std::vector<RuleKey>& rule_keys() {
  static const std::vector<RuleKey> keys = build_rule_keys();
  return keys;
}

const ConfigKey* find_config_key(std::string_view dotted) {
  for (const auto& k : config_keys())
    if (k.name == dotted) return &k;
  return nullptr;
}

const RuleKey* find_rule_key(std::string_view name) {
  for (const auto& k : rule_keys())
    if (k.name == name) return &k;
  return nullptr;
}

}  // namespace predrop::policy::detail

namespace predrop::policy {

std::vector<std::string> known_keys() {
  std::vector<std::string> out;
  for (const auto& k : detail::config_keys()) out.push_back(k.name);
  out.push_back("rules");
  for (const auto& k : detail::rule_keys()) out.push_back("rules[]." + k.name);
  return out;
}

std::optional<ReloadBehaviour> reload_behaviour(std::string_view key) {
  if (const auto* k = detail::find_config_key(key)) return k->reload;
  if (key == "rules" || key.starts_with("rules[].")) return ReloadBehaviour::sighup;
  return std::nullopt;
}

}  // namespace predrop::policy
