// The console: psql -p 6432 predrop -c 'SHOW HOLDS', as operators of PgBouncer type it.
// A client that asks for console.database reaches predrop itself and nothing is relayed. predrop
// keeps no credentials: the server authenticates the user (the startup goes to its postgres
// database, and authentication is relayed as for any session), then predrop asks it whether the user
// is a member of console.role, unless console.users lists it. Only the simple protocol is answered.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace predrop::policy {
struct Config;
}

namespace predrop::proxy {

// A command's answer: rows psql prints, or an error (sqlstate set).
struct ConsoleReply {
  std::vector<std::string> columns;
  std::vector<std::vector<std::optional<std::string>>> rows;
  std::string tag;   // CommandComplete; empty: the command's first word
  std::string sqlstate, message, detail, hint;

  static ConsoleReply error(std::string sqlstate, std::string message, std::string detail = {}, std::string hint = {}) {
    ConsoleReply r;
    r.sqlstate = std::move(sqlstate);
    r.message = std::move(message);
    r.detail = std::move(detail);
    r.hint = std::move(hint);
    return r;
  }
};

// Who typed the command, for the commands that act and for the log.
struct ConsoleCaller {
  std::string user;
  std::string client_addr;
};

// Commands served outside proxy/ (cli/ gives them to serve: they read the store, or undrop). Each
// runs on a thread of its own, never on a relay loop; `args` is the text after the command's words,
// `config` the policy in force.
using ConsoleCommand = std::function<ConsoleReply(const std::string& args, const ConsoleCaller& caller,
                                                  std::shared_ptr<const policy::Config> config)>;
// By their words, upper case: "SHOW QUARANTINE", "UNDROP".
using ConsoleCommands = std::map<std::string, ConsoleCommand>;

class Console;
class Transport;
struct ProxyContext;

// What the console may use of the session it takes over, handed over by the session
// (proxy/startup.cpp), which stays their owner: its two connections and loop, who is calling, and
// its close. `lifetime` keeps the session, and so everything here, alive while the console runs.
struct ConsoleLink {
  std::shared_ptr<void> lifetime;
  Transport& client;
  Transport& server;
  boost::asio::any_io_executor executor;
  ProxyContext& ctx;
  std::shared_ptr<const policy::Config> cfg;
  std::string user, client_addr;
  bool strip_scram_plus = false;   // the session's: a plaintext client leg over a TLS upstream
  std::function<bool()> closed;
  std::function<void(std::string_view why)> close;
  std::function<void(const char* why)> close_with_close_notify;
};

// Takes over a session whose startup asked for console.database, once the startup went to the server:
// relays authentication, checks membership, then answers commands until the client leaves. The
// session keeps the console only weakly, to tell it of a drain.
std::shared_ptr<Console> run_console(ConsoleLink link);
// The drain is over (SIGTERM): the console tells its client as the server would, and closes.
void console_terminate_admin_shutdown(const std::shared_ptr<Console>& console);

}  // namespace predrop::proxy
