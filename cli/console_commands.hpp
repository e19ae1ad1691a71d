// The console's commands that read the store or act on the server as the CLI does (SHOW QUARANTINE,
// SHOW AGES, SHOW SNAPSHOTS, UNDROP); serve gives them to proxy/console.cpp, which runs each on a
// thread of its own with the policy in force.
#pragma once

#include "proxy/console.hpp"

namespace predrop::cli {

proxy::ConsoleCommands console_commands();

}  // namespace predrop::cli
