// proxy/ — sessions, framing, TLS, the hold and the release, the admin endpoint.
// The only room that knows the others.
#pragma once

#include "proxy/console.hpp"

#include <functional>
#include <memory>

#include "policy/policy.hpp"

namespace predrop::proxy {

// Command-line flags, re-applied to every config a SIGHUP reloads so that a flag keeps winning.
using ConfigOverrides = std::function<void(policy::Config&)>;

// Runs until SIGTERM/SIGINT (drained) and returns the process exit code.
// console_commands: the console's commands served outside proxy/ (proxy/console.hpp).
int serve(std::shared_ptr<const policy::Config> config, const std::string& config_path, ConfigOverrides overrides = {},
          ConsoleCommands console_commands = {});

}  // namespace predrop::proxy
