#include "cli/watch.hpp"

#include <fcntl.h>
#include <libpq-fe.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/diff_text.hpp"
#include "cli/evidence_support.hpp"
#include "evidence/store_reader.hpp"

namespace predrop::cli {

namespace {

using namespace predrop::evidence;
using nlohmann::json;

constexpr const char* kChannel = "predrop_snapshots";

volatile std::sig_atomic_t g_stop = 0;
int g_wake[2] = {-1, -1};

// A signal can arrive between the flag test and poll(): the pipe makes poll return anyway.
void on_signal(int) {
  g_stop = 1;
  if (g_wake[1] >= 0) {
    char c = 0;
    [[maybe_unused]] auto n = write(g_wake[1], &c, 1);
  }
}

std::string str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

struct Diffed {
  std::optional<SnapshotDiff> diff;
  std::string error;  // why there is no diff
};

// The after is read back by id (the notification is sent by the transaction that wrote it, so
// it is committed and visible by the time it is delivered), its before by pair_of.
Diffed diff_against_pair(EvidenceStore& store, const std::string& id, const std::string& pair_of, const DiffOptions& opt) {
  auto after = store.by_id(id);
  if (!after) return {std::nullopt, "snapshot " + id + " is not in the store table"};
  auto before = store.by_id(pair_of);
  if (!before) return {std::nullopt, "its before " + pair_of + " is not in the store table"};
  if (!after->profile_ok || !before->profile_ok) return {std::nullopt, "a columns_profile could not be read"};
  return {diff_snapshots(*before, *after, opt), ""};
}

void print_event(EvidenceStore& store, const std::string& payload, const Setup& s, bool as_json) {
  json j = json::parse(payload, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    if (as_json) std::cout << json{{"error", "unreadable payload"}, {"payload", payload}}.dump() << "\n";
    else std::cout << "unreadable payload: " << payload << "\n";
    std::cout.flush();
    return;
  }
  std::string id = str(j, "id"), pair_of = str(j, "pair_of");
  std::optional<Diffed> d;
  if (!pair_of.empty()) d = diff_against_pair(store, id, pair_of, s.diff);
  if (as_json) {
    if (d) {
      j["diff"] = d->diff ? to_json(*d->diff) : json(nullptr);
      if (!d->error.empty()) j["diff_error"] = d->error;
    }
    std::cout << j.dump() << "\n";
  } else {
    const Paint& p = s.paint;
    std::string where = str(j, "database");
    where += (where.empty() ? "" : "/") + str(j, "schema") + "." + str(j, "table");
    std::cout << str(j, "captured_at") << "  " << str(j, "reason") << "  " << p.bold(where) << "  " << short_id(id) << "  "
              << p.dim(str(j, "schema_hash").substr(0, 8));
    if (d) {
      std::cout << "  pairs with " << short_id(pair_of) << ": ";
      if (d->diff) std::cout << p.cyan(change_summary(*d->diff));
      else std::cout << p.yellow("no diff: " + d->error);
    } else if (str(j, "reason").rfind("post_", 0) == 0) {
      std::cout << "  " << p.dim("unpaired (a new table)");
    }
    std::cout << "\n";
  }
  std::cout.flush();
}

void cmd_watch(const Common& c) {
  auto s = setup("watch", c);
  if (c.format == "html") fail("watch", "--format is text or json", 2);
  if (pipe2(g_wake, O_CLOEXEC | O_NONBLOCK) != 0) fail("watch", std::string("pipe: ") + std::strerror(errno));
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  bool as_json = c.format == "json";
  try {
    EvidenceStore store(s.store, s.cfg->store_table);
    store.session().run(std::string("LISTEN ") + kChannel);
    PGconn* conn = store.session().raw();
    std::cerr << "predrop watch: listening on " << kChannel << "\n";
    auto lost = [&] {
      std::string err;
      for (char ch : std::string(PQerrorMessage(conn))) err += ch == '\n' ? std::string("; ") : std::string(1, ch);
      while (!err.empty() && (err.back() == ' ' || err.back() == ';')) err.pop_back();
      fail("watch", "lost the store connection" + (err.empty() ? "" : ": " + err) +
                        " (snapshots notified while nobody listens are not replayed: read them with history or report)");
    };
    while (!g_stop) {
      pollfd fds[2] = {{PQsocket(conn), POLLIN, 0}, {g_wake[0], POLLIN, 0}};
      if (fds[0].fd < 0) lost();
      int n = poll(fds, 2, -1);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail("watch", std::string("poll: ") + std::strerror(errno));
      if (g_stop) break;
      if (!fds[0].revents) continue;
      if (!PQconsumeInput(conn) || PQstatus(conn) != CONNECTION_OK) lost();
      while (PGnotify* nt = PQnotifies(conn)) {
        std::string payload = nt->extra ? nt->extra : "";
        PQfreemem(nt);
        print_event(store, payload, s, as_json);
      }
      if (PQstatus(conn) != CONNECTION_OK) lost();
    }
  } catch (const CLI::Error&) {
    throw;  // finish(): an exit code, not a failure
  } catch (const std::runtime_error& e) {
    fail("watch", e.what());
  }
  finish(0);
}

}  // namespace

void register_watch_command(CLI::App& app) {
  auto c = std::make_shared<Common>();
  auto* watch = app.add_subcommand("watch", "print every snapshot as the store announces it (LISTEN predrop_snapshots)");
  add_common(watch, *c, true);
  watch->callback([c] { cmd_watch(*c); });
}

}  // namespace predrop::cli
