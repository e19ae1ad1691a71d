// `predrop watch`: LISTEN on the store's predrop_snapshots channel and print every snapshot as
// its notification arrives, one line of text or one JSON object per line; a snapshot that
// completes a pair (pair_of set) comes with its diff against that before. The connection
// dropping ends the command with exit 1 and a message (notifications sent while no one listens
// are not replayed by PostgreSQL); SIGINT and SIGTERM end it with exit 0.
#pragma once

#include <CLI/CLI.hpp>

namespace predrop::cli {

void register_watch_command(CLI::App& app);

}  // namespace predrop::cli
