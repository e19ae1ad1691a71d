// The evidence tools: `predrop baseline | diff | history | report | ddl`. Each reads the store
// named by --store (or the config's store.conninfo) and prints text on a terminal or JSON with
// --format json. A subcommand runs inside CLI11's parse and ends it by throwing
// CLI::RuntimeError(exit code), so main's own dispatch never sees it.
#pragma once

#include <CLI/CLI.hpp>

namespace predrop::cli {

void register_evidence_commands(CLI::App& app);

}  // namespace predrop::cli
