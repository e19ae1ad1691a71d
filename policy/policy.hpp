// policy/ — the config file, its validation, the rules and their reload.
// Knows nothing of sockets or SQL.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "parser/destroy_kind.hpp"
#include "policy/cidr.hpp"

namespace predrop::policy {

// What a rule decides for: the parser's vocabulary (a header; policy/ does not link the parser).
using parser::DestroyKind;

struct Endpoint {
  std::string host;
  uint16_t port = 0;
  std::string to_string() const;
};
std::optional<Endpoint> parse_endpoint(std::string_view host_port);
// The admin endpoint: HOST:PORT, or PORT alone for 127.0.0.1:PORT (loopback unless configured otherwise).
std::optional<Endpoint> parse_admin_endpoint(std::string_view text);

struct ClientTls {                 // the client leg: predrop is the TLS server
  std::string cert_file;           // empty: SSLRequest answered 'N'
  std::string key_file;
  std::string min_version = "1.2"; // 1.2 | 1.3
  std::string max_version = "1.3";
  std::string ciphers;             // TLS 1.2 OpenSSL cipher list; empty: OpenSSL's default
  std::string ciphersuites;        // TLS 1.3 suites, colon-separated; empty: OpenSSL's default
};

struct UpstreamTls {               // the upstream leg, libpq's sslmode semantics
  std::string sslmode = "disable"; // disable | prefer | require | verify-ca | verify-full
  std::string root_cert;
  std::string server_name;         // verify-full host name; default: the upstream host
  std::string min_version = "1.2";
  std::string max_version = "1.3";
  std::string ciphers;
  std::string ciphersuites;
};

struct Limits {
  int max_clients = 10000;
  uint64_t max_message_bytes = 1ull << 30;   // PostgreSQL's own limit
  uint32_t max_inspect_bytes = 1u << 20;     // Query/Parse assembled whole up to this to be classified
  int startup_timeout_ms = 60000;   // the server's authentication_timeout
  int drain_timeout_ms = 30000;
  int buffer_bytes = 16384;                  // per direction, per active session
};

struct Logging {
  std::string format = "text";     // text | json
  std::string level = "info";
};

// quarantine: snapshot, then move the table into quarantine_schema instead of dropping it
// (drop_table and drop_schema only; for other kinds a quarantine rule decides snapshot).
enum class Action : uint8_t { snapshot, skip, quarantine };
enum class OnFailure : uint8_t { open, closed };

struct Rule {
  std::string database = "*";      // globs: * and ?
  std::string schema = "*";
  std::string table = "*";
  uint32_t kinds = 0xFFFFFFFFu;    // bit i = parser::DestroyKind i; all by default
  bool kinds_set = false;          // kinds named in the file (check-config judges a quarantine rule by them)
  // Who: empty means any; a condition never matches a session whose value is unknown (empty).
  std::string user;                // glob on the session's user
  std::string application_name;    // glob on the startup application_name
  std::string client_addr;         // as written: an address or a CIDR
  std::optional<Cidr> client_net;  // client_addr parsed
  Action action = Action::snapshot;
  OnFailure on_failure = OnFailure::open;
};

// The session a statement comes from; empty fields are unknown.
struct Who {
  std::string_view user, application_name, client_addr;
};

struct Decision {
  Action action = Action::snapshot;
  OnFailure on_failure = OnFailure::open;
  int rule_index = -1;             // -1: the built-in default
};

struct Config {
  Endpoint listen{"127.0.0.1", 6432};
  Endpoint upstream{"127.0.0.1", 5432};
  std::optional<Endpoint> admin;   // --admin; a bare PORT means 127.0.0.1:PORT
  ClientTls tls;
  UpstreamTls upstream_tls;
  Limits limits;
  Logging logging;
  int threads = 0;                 // 0: one per core

  bool snapshots_enabled = true;   // PREDROP_SNAPSHOTS=off turns holds off
  std::string capture_conninfo;
  std::string store_conninfo;
  std::string capture_conninfo_file;  // where capture_conninfo was read from, if anywhere
  std::string store_conninfo_file;
  std::string store_table = "predrop.schema_snapshots";
  bool migrate_on_start = true;
  int store_check_interval_s = 10;  // predrop_store_up: how often a quiet store is checked
  int hold_timeout_ms = 2000;
  int capture_pool_size = 4;
  // Capture and store connections idle this long are closed (0: kept open), so that a fleet of
  // sidecars holds connections only while it captures.
  int capture_idle_close_s = 60;
  // The "after": once a transaction that created or changed a covered table commits, its new shape
  // is captured (post_create / post_alter), and its profile again once statistics exist (post_analyze).
  bool after_capture = true;
  // An after waits this long for a hold of its table to write it as a copy of its before (no
  // catalog read): a table recreated and dropped within it is read once.
  int after_delay_ms = 1000;
  bool analyze_after_create = false;   // run ANALYZE on a new table ourselves (samples it: off by default)
  int stats_horizon_s = 3600;          // wait this long for pg_stats, then keep the shape alone
  int stats_poll_ms = 5000;            // one pg_stat_user_tables query per database this often
  int stats_waiting_max = 10000;       // afters waiting for statistics; past it the oldest gives up
  int profile_max_values = 20;
  int profile_max_value_chars = 120;
  int profile_max_columns = 300;
  std::vector<std::string> hash_excluded = {"_source_dataset_id", "_ingested_at", "_source_url"};
  bool naive_array_split = false;
  int dedup_window_s = 0;
  std::string enrich_identity_sql;
  std::string enrich_provenance_sql;
  // The baseline inside serve: a pass every baseline_interval_s (0: off) over baseline_databases,
  // one sidecar of a fleet at a time (an advisory lock on the store).
  int baseline_interval_s = 0;
  std::vector<std::string> baseline_databases;
  std::vector<std::string> baseline_exclude;  // "schema.table" globs, never baselined
  // 100 and 1: on 2 cores with the server local, more lanes and larger batches were slower at
  // 300 and 2,000 tables (evidence/baseline.hpp).
  int baseline_batch_size = 100;
  int baseline_lanes = 1;
  // Quarantine: dropped tables kept whole, per database, for quarantine_retention_s.
  std::string quarantine_schema = "predrop_quarantine";
  int64_t quarantine_retention_s = 604800;
  uint64_t quarantine_max_bytes = 0;      // 0: no cap
  int64_t quarantine_max_tables = 0;      // 0: no cap
  int quarantine_purge_interval_s = 60;
  int quarantine_lock_timeout_ms = 100;
  // Store retention (evidence/retention.hpp): snapshots older than this are pruned inside serve every
  // store_prune_interval_s, one sidecar at a time; 0: never.
  int64_t store_retention_s = 0;
  int store_prune_interval_s = 3600;
  // Seconds between the store reads behind predrop_table_version_age_seconds; 0: no such metric.
  int metrics_ages_interval_s = 300;
  // The console (proxy/console.hpp): a client that asks for this database reaches predrop itself,
  // once the server authenticated it (against its postgres database) and it is a member of
  // console_role or listed in console_users. Empty: no console; every database is relayed.
  std::string console_database = "predrop";
  std::string console_role = "predrop_admin";
  std::vector<std::string> console_users;
  std::vector<Rule> rules;         // first match wins
  Rule default_rule;               // when none matches

  Decision decide(std::string_view database, std::string_view schema, std::string_view table, DestroyKind kind,
                  const Who& who) const;
  // With nobody known: rules that name a user, application_name or client_addr never match.
  Decision decide(std::string_view database, std::string_view schema, std::string_view table,
                  DestroyKind kind) const;
  // Whether a quarantine rule (or the default) could put this database's tables in quarantine.
  bool quarantines_in(std::string_view database) const;
  // Whether a baseline.exclude glob names the table.
  bool baseline_excludes(std::string_view schema, std::string_view table) const;
};

// Whether a key takes effect on SIGHUP or only at restart.
enum class ReloadBehaviour : uint8_t { sighup, restart };

struct ConfigError {
  std::string file;
  int line = 0;      // 1-based; 0 when not tied to a place
  int column = 0;
  std::string message;
  std::string to_string() const;
};

struct LoadResult {
  std::shared_ptr<const Config> config;   // null when errors is non-empty
  std::vector<ConfigError> errors;
};

// Parse and validate a YAML file, then apply PREDROP_<SECTION>_<KEY> environment overrides
// (and the PREDROP_SNAPSHOTS kill switch), read conninfo_file secrets and check across keys.
// Relative paths in the file resolve against the file's folder.
LoadResult load_file(const std::string& path);
// The same for text in memory; `name` is the file name errors carry. Environment overrides apply
// here too; relative paths stay relative to the working directory.
LoadResult load_string(std::string_view yaml, const std::string& name = "<string>");
// Defaults plus environment overrides, for running without a file.
LoadResult load_defaults();
// Every key the loader accepts, dotted ("limits.max_clients"): README's reference is checked against it.
std::vector<std::string> known_keys();
// For check-config and logs: the config with secrets masked.
std::string describe(const Config& config);
// The same, one row per dotted key ("rules[0].action" for rules), for the console's SHOW CONFIG.
struct ConfigValue {
  std::string key;
  std::string value;                 // secrets masked; a list's items joined with ", "
  ReloadBehaviour reload;
};
std::vector<ConfigValue> config_values(const Config& config);
std::string mask_conninfo(std::string_view conninfo);

// The names rules use for parser::DestroyKind, in its order (index = bit in Rule::kinds).
inline constexpr int kKindCount = parser::kDestroyKindCount;
std::string_view kind_name(int kind);              // "" when out of range
std::optional<int> kind_from_name(std::string_view name);

// Whether a key ("limits.max_clients") takes effect on SIGHUP or only at restart; nullopt if unknown.
std::optional<ReloadBehaviour> reload_behaviour(std::string_view key);

struct ReloadResult {
  bool ok = false;                          // false: the running config was kept
  std::vector<ConfigError> errors;
  // Restart-only keys whose value in the file differs from the running one; the running value is
  // kept until restart, so a SIGHUP never half-applies a listener or pool change.
  std::vector<std::string> restart_required;
};

// For a reload: gives every restart-only key of next its running value and returns the names of
// those whose value next had changed (they take effect at the next start).
std::vector<std::string> keep_restart_keys(Config& next, const Config& running);

// The running config, swapped whole on reload; readers take a snapshot with current().
class PolicyHolder {
 public:
  // Applied to every config loaded by reload(), e.g. command-line flags that outrank the file.
  using Overrides = std::function<void(Config&)>;
  explicit PolicyHolder(std::shared_ptr<const Config> initial, Overrides overrides = {});

  std::shared_ptr<const Config> current() const;
  // Loads path; on any error keeps the running config and returns the errors.
  ReloadResult reload(const std::string& path);

  uint64_t reloads_ok() const { return reloads_ok_.load(); }
  uint64_t reloads_failed() const { return reloads_failed_.load(); }

 private:
  mutable std::mutex mutex_;
  std::mutex reload_mutex_;                 // one reload at a time; readers are not blocked by file I/O
  std::shared_ptr<const Config> current_;
  Overrides overrides_;
  std::atomic<uint64_t> reloads_ok_{0};
  std::atomic<uint64_t> reloads_failed_{0};
};

}  // namespace predrop::policy
