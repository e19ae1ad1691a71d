// The quarantine's commands (issue 16): `predrop undrop` and `predrop quarantine list | purge`.
// They parse arguments and print; what they do is quarantine/held.hpp's.
#pragma once

#include <CLI/CLI.hpp>

namespace predrop::cli {

void register_quarantine_commands(CLI::App& app);

}  // namespace predrop::cli
