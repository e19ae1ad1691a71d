// proxy/ — sessions, framing, TLS, the hold and the release, the admin endpoint.
// The only room that knows the others.
#pragma once

#include <memory>

#include "policy/policy.hpp"

namespace predrop::proxy {

// Runs until SIGTERM/SIGINT (drained) and returns the process exit code.
int serve(std::shared_ptr<const policy::Config> config, const std::string& config_path);

}  // namespace predrop::proxy
