// Building libpq connection parameters for predrop's own connections, and keeping passwords
// out of logs. Passwords come from libpq's usual means (conninfo, PGPASSWORD, .pgpass); predrop
// never reads them itself.
#pragma once

#include <string>
#include <vector>

namespace predrop::capture {

// Keyword/value arrays for PQconnectStartParams/PQconnectdbParams with expand_dbname=1: the
// base conninfo is expanded first, then dbname (when not empty), application_name and options
// override it. `options` is appended to any options the base conninfo already carries.
struct ConnectParams {
  std::vector<std::string> keys, values;
  std::vector<const char*> key_ptrs() const;
  std::vector<const char*> value_ptrs() const;
};
ConnectParams connect_params(const std::string& base_conninfo, const std::string& dbname,
                             const std::string& application_name, const std::string& options);

}  // namespace predrop::capture
