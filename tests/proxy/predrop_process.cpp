#include "predrop_process.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace ptest {

using Clock = std::chrono::steady_clock;

namespace {
uint16_t bound_port(bool listen_too) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return 0;
  }
  if (listen_too) ::listen(fd, 1);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

std::optional<int> decode_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return std::nullopt;
}

std::string unique_suffix() {
  static std::atomic<int> n{0};
  return std::to_string(getpid()) + "." + std::to_string(n++);
}
}  // namespace

uint16_t free_port() { return bound_port(false); }

std::string StoreDatabase::capture_conninfo() const {
  const Env& e = env();
  return "host=" + e.pghost + " port=" + std::to_string(e.pgport) + " user=" + e.pguser;
}

std::string StoreDatabase::conninfo() const { return capture_conninfo() + " dbname=" + name_; }

RawConn::QueryResult StoreDatabase::query(const std::string& sql) const {
  RawConn c = RawConn::to(env().pgport, env().pghost);
  auto r = c.startup({{"user", env().pguser}, {"database", name_}, {"application_name", "ptest-store"}});
  if (!r.ok) {
    RawConn::QueryResult failed;
    failed.error = ErrorInfo{"ERROR", "", "store " + name_ + ": " + (r.error ? r.error->message : c.last_error())};
    return failed;
  }
  return c.simple_query(sql);
}

bool StoreDatabase::create(const std::string& name) {
  if (auto p = env_problem(); !p.empty()) {
    error_ = p;
    return false;
  }
  try {
    RawConn admin = direct_admin("ptest-store-admin");
    // Two queries: neither statement runs inside the implicit transaction of a multi-statement one.
    for (const std::string& sql : {"DROP DATABASE IF EXISTS " + name + " WITH (FORCE)", "CREATE DATABASE " + name}) {
      auto r = admin.simple_query(sql);
      if (r.error || !r.complete) {
        error_ = sql + ": " + (r.error ? r.error->message : std::string("no reply"));
        return false;
      }
    }
  } catch (const std::exception& ex) {
    error_ = ex.what();
    return false;
  }
  name_ = name;
  // Migrated before predrop starts (which then runs with --no-migrate), so no DROP meets a store still
  // being migrated in the background and the run fails here, clearly, when migration does.
  std::string log = env().workdir + "/ptest-migrate." + name + ".log";
  std::string cmd = "'" + env().predrop_bin + "' migrate --store '" + conninfo() + "' >'" + log + "' 2>&1";
  if (int rc = std::system(cmd.c_str()); rc != 0) {
    std::ifstream in(log);
    std::stringstream ss;
    ss << in.rdbuf();
    error_ = "predrop migrate --store '" + conninfo() + "' exited " + std::to_string(rc) + ":\n" + ss.str();
    return false;
  }
  return true;
}

StoreDatabase::~StoreDatabase() {
  if (name_.empty()) return;
  try {
    direct_admin("ptest-store-admin").simple_query("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
  } catch (const std::exception&) {
    // The cluster is a throwaway one; a leftover database does not change another test.
  }
}
uint16_t closed_port() { return bound_port(false); }

PredropProcess::~PredropProcess() {
  if (pid_ > 0 && !exit_code_) {
    ::kill(pid_, SIGKILL);
    int st = 0;
    ::waitpid(pid_, &st, 0);
  }
}

bool PredropProcess::start(const PredropOptions& opts) {
  if (auto p = env_problem(); !p.empty()) {
    error_ = p;
    return false;
  }
  const Env& e = env();
  std::string base = e.workdir + "/ptest-predrop." + unique_suffix();
  if (!opts.config_yaml.empty()) {
    config_path_ = base + ".yaml";
    std::ofstream(config_path_) << opts.config_yaml;
  }
  std::string upstream = opts.upstream.empty() ? e.pghost + ":" + std::to_string(e.pgport) : opts.upstream;
  for (int attempt = 0; attempt < 3; ++attempt) {
    port_ = free_port();
    log_path_ = base + "." + std::to_string(port_) + ".log";
    std::vector<std::string> args = {e.predrop_bin, "serve", "--listen", "127.0.0.1:" + std::to_string(port_),
                                     "--upstream", upstream};
    if (!config_path_.empty()) {
      args.push_back("--config");
      args.push_back(config_path_);
    }
    for (const auto& a : opts.extra_args) args.push_back(a);
    {
      std::ofstream log(log_path_);
      log << "#";
      for (const auto& a : args) log << ' ' << a;
      log << '\n';
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    pid_t pid = ::fork();
    if (pid < 0) {
      error_ = std::string("fork: ") + std::strerror(errno);
      return false;
    }
    if (pid == 0) {
      int fd = ::open(log_path_.c_str(), O_WRONLY | O_APPEND);
      int devnull = ::open("/dev/null", O_RDONLY);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      if (devnull >= 0) ::dup2(devnull, 0);
      ::execv(argv[0], argv.data());
      _exit(127);
    }
    pid_ = pid;
    exit_code_.reset();
    auto deadline = Clock::now() + opts.start_timeout;
    for (;;) {
      if (!running()) {
        if (log().find("already in use") != std::string::npos && attempt < 2) break;   // lost the port: retry
        error_ = "predrop exited (status " + std::to_string(exit_code_.value_or(-1)) + ") before accepting; log:\n" + log();
        return false;
      }
      RawConn probe;
      if (probe.connect("127.0.0.1", port_, std::chrono::milliseconds(1000))) {
        probe.close();
        return true;
      }
      if (Clock::now() > deadline) {
        error_ = "predrop did not accept on 127.0.0.1:" + std::to_string(port_) + "; log:\n" + log();
        ::kill(pid_, SIGKILL);
        int st;
        ::waitpid(pid_, &st, 0);
        exit_code_ = decode_status(st);
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  error_ = "could not find a free port for predrop";
  return false;
}

std::string PredropProcess::log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool PredropProcess::running() {
  if (pid_ <= 0 || exit_code_) return false;
  int st = 0;
  pid_t r = ::waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    exit_code_ = decode_status(st).value_or(-1);
    return false;
  }
  return true;
}

std::string PredropProcess::status() {
  if (running()) return "running";
  if (!exit_code_) return "not started";
  int c = *exit_code_;
  if (c > 128) return "killed by signal " + std::to_string(c - 128) + " (" + strsignal(c - 128) + ")";
  return "exited with status " + std::to_string(c);
}

void PredropProcess::signal(int sig) {
  if (running()) ::kill(pid_, sig);
}

std::optional<int> PredropProcess::wait_exit(std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (running()) {
    if (Clock::now() > deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return exit_code_;
}

std::optional<int> PredropProcess::stop(std::chrono::milliseconds grace) {
  if (!running()) return exit_code_;
  ::kill(pid_, SIGTERM);
  if (auto code = wait_exit(grace)) return code;
  ::kill(pid_, SIGKILL);
  int st;
  ::waitpid(pid_, &st, 0);
  exit_code_ = decode_status(st).value_or(-1);
  return std::nullopt;
}

int PredropProcess::fd_count() const {
  std::string path = "/proc/" + std::to_string(pid_) + "/fd";
  DIR* d = ::opendir(path.c_str());
  if (!d) return -1;
  int n = 0;
  while (dirent* ent = ::readdir(d))
    if (ent->d_name[0] != '.') ++n;
  ::closedir(d);
  return n;
}

long PredropProcess::rss_kb() const {
  std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

}  // namespace ptest
