// Blocking checks against the store, for the admin endpoint's own thread.
#pragma once

#include <string>

namespace predrop::capture {

// Empty when the store answers and predrop may insert into both tables; else the reason.
std::string store_writable(const std::string& conninfo, const std::string& store_table, const std::string& events_table);
// The newest `limit` ledger rows as a JSON array (newest first).
bool read_recent_events(const std::string& conninfo, const std::string& events_table, int limit, std::string& json,
                        std::string& error);

}  // namespace predrop::capture
