// Checks that involve more than one key, or the file system: run after every source is applied.
#include <fstream>

#include "policy/load_context.hpp"

namespace predrop::policy::detail {

namespace {

void check_readable(LoadContext& ctx, const std::string& key, const std::string& path) {
  if (path.empty()) return;
  std::ifstream in(path);
  if (!in) ctx.error(ctx.origin_of(key), key + ": cannot read '" + path + "'");
}

// Versions are "1.2" / "1.3", so text order is version order.
void check_version_range(LoadContext& ctx, const std::string& leg, const std::string& min, const std::string& max) {
  if (min <= max) return;
  const std::string key = leg + (ctx.origins.count(leg + ".max_version") ? ".max_version" : ".min_version");
  ctx.error(ctx.origin_of(key), key + ": " + leg + ".min_version (" + min + ") is above " + leg + ".max_version (" + max +
                                    "); no TLS version would be left");
}

}  // namespace

void check_across_keys(LoadContext& ctx) {
  const Config& c = ctx.config;
  if (c.tls.cert_file.empty() != c.tls.key_file.empty()) {
    const std::string set = c.tls.cert_file.empty() ? "tls.key_file" : "tls.cert_file";
    const std::string missing = c.tls.cert_file.empty() ? "tls.cert_file" : "tls.key_file";
    ctx.error(ctx.origin_of(set), set + " is set but " + missing + " is not; TLS needs both");
  }
  // Checked here rather than at first handshake so check-config and a reload catch them.
  check_readable(ctx, "tls.cert_file", c.tls.cert_file);
  check_readable(ctx, "tls.key_file", c.tls.key_file);
  check_readable(ctx, "upstream_tls.root_cert", c.upstream_tls.root_cert);

  check_version_range(ctx, "tls", c.tls.min_version, c.tls.max_version);
  check_version_range(ctx, "upstream_tls", c.upstream_tls.min_version, c.upstream_tls.max_version);

  // Naming the databases is the operator's choice: a sidecar must not start walking every
  // database its capture role happens to reach.
  if (c.baseline_interval_s > 0 && c.baseline_databases.empty()) {
    const std::string key = ctx.origins.count("baseline.databases") ? "baseline.databases" : "baseline.interval_s";
    ctx.error(ctx.origin_of(key), key + ": baseline.interval_s is " + std::to_string(c.baseline_interval_s) +
                                      " but baseline.databases is empty; name the databases serve should baseline");
  }

  if (c.limits.max_inspect_bytes > c.limits.max_message_bytes) {
    const std::string key =
        ctx.origins.count("limits.max_inspect_bytes") ? "limits.max_inspect_bytes" : "limits.max_message_bytes";
    ctx.error(ctx.origin_of(key), key + ": limits.max_inspect_bytes (" + std::to_string(c.limits.max_inspect_bytes) +
                                      ") must not exceed limits.max_message_bytes (" +
                                      std::to_string(c.limits.max_message_bytes) + ")");
  }
}

}  // namespace predrop::policy::detail
