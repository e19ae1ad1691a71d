// predrop under test as a child process: `PREDROP_BIN serve --listen 127.0.0.1:<free port>
// --upstream <PGHOST:PGPORT> [--config FILE] [args]`, output captured in a log file.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "raw_client.hpp"

namespace ptest {

// A store database of its own on the test cluster, created and migrated (`predrop migrate`) by
// create(), dropped by the destructor. with_capture_and_store() starts predrop with it and capture
// connections as the test user, so every destructive statement is really held while its snapshot
// is taken, and recorded in the ledger (predrop.drop_events).
class StoreDatabase {
 public:
  StoreDatabase() = default;
  ~StoreDatabase();
  StoreDatabase(const StoreDatabase&) = delete;
  StoreDatabase& operator=(const StoreDatabase&) = delete;

  bool create(const std::string& name);   // false, with error(), when it could not be created or migrated
  const std::string& error() const { return error_; }
  const std::string& name() const { return name_; }
  std::string conninfo() const;           // libpq conninfo of the store
  std::string capture_conninfo() const;   // libpq conninfo for capture (no dbname)
  // A simple query on the store, as RawConn::simple_query (a failed connection is an error).
  RawConn::QueryResult query(const std::string& sql) const;

 private:
  std::string name_;
  std::string error_;
};

// A free loopback TCP port (bound and released; small race with other binders).
uint16_t free_port();
// A loopback port nothing listens on (bound without listen(), then released).
uint16_t closed_port();

struct PredropOptions {
  std::string config_yaml;              // written to a file and passed as --config when not empty
  std::vector<std::string> extra_args;  // appended after the standard ones
  std::string upstream;                 // default PGHOST:PGPORT
  std::chrono::milliseconds start_timeout{15000};

  static PredropOptions with_config(std::string yaml) {
    PredropOptions o;
    o.config_yaml = std::move(yaml);
    return o;
  }
  static PredropOptions with_upstream(std::string hostport) {
    PredropOptions o;
    o.upstream = std::move(hostport);
    return o;
  }
  static PredropOptions with_capture_and_store(const StoreDatabase& store) {
    PredropOptions o;
    o.extra_args = {"--capture", store.capture_conninfo(), "--store", store.conninfo(), "--no-migrate"};
    return o;
  }
};

class PredropProcess {
 public:
  PredropProcess() = default;
  ~PredropProcess();
  PredropProcess(const PredropProcess&) = delete;
  PredropProcess& operator=(const PredropProcess&) = delete;

  // Starts and waits until the port accepts. False (reason in error()) on failure.
  bool start(const PredropOptions& opts = {});
  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }
  const std::string& error() const { return error_; }
  const std::string& log_path() const { return log_path_; }
  std::string log() const;   // the whole log so far
  bool running();            // not exited (reaps it when it has)
  // "running", or how it ended ("exited with status 0", "killed by signal 11 (Segmentation fault)").
  std::string status();

  // Sends SIGTERM and waits up to `grace` for the exit; SIGKILL after that. Exit status (WEXITSTATUS),
  // 128+signal when killed by a signal, nullopt when it had to be SIGKILLed.
  std::optional<int> stop(std::chrono::milliseconds grace = std::chrono::milliseconds(10000));
  void signal(int sig);
  // Waits for the process to exit on its own; exit code as for stop(), nullopt on timeout.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout);

  // /proc figures.
  int fd_count() const;
  long rss_kb() const;

  // A client connected to this predrop.
  RawConn connect() const { return RawConn::to(port_); }

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  std::string error_;
  std::string log_path_;
  std::string config_path_;
  std::optional<int> exit_code_;
};

}  // namespace ptest
