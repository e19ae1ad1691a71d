// Blocking libpq helpers for the integration tests: the cluster comes from PGHOST/PGPORT/PGUSER.
#pragma once

#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace predrop::capture::testing {

inline bool have_cluster() { return std::getenv("PGPORT") && std::getenv("PGHOST"); }

// A name no other test process will pick: prefix_<pid>_<counter>_<random>.
inline std::string unique_name(const std::string& prefix) {
  static std::atomic<int> counter{0};
  static std::mt19937 rng(std::random_device{}());
  return prefix + "_" + std::to_string(getpid()) + "_" + std::to_string(counter++) + "_" +
         std::to_string(rng() % 100000);
}

// Base conninfo of the test cluster, without dbname (libpq's env vars fill in the rest).
inline std::string base_conninfo() {
  std::string s = "host=" + std::string(std::getenv("PGHOST") ? std::getenv("PGHOST") : "127.0.0.1");
  if (const char* p = std::getenv("PGPORT")) s += std::string(" port=") + p;
  s += std::string(" user=") + (std::getenv("PGUSER") ? std::getenv("PGUSER") : "postgres");
  return s;
}

inline std::string conninfo_for(const std::string& db) { return base_conninfo() + " dbname=" + db; }

using Rows = std::vector<std::vector<std::optional<std::string>>>;

class Db {
 public:
  explicit Db(const std::string& dbname) : conn_(PQconnectdb(conninfo_for(dbname).c_str()), PQfinish) {
    if (PQstatus(conn_.get()) != CONNECTION_OK) throw std::runtime_error(PQerrorMessage(conn_.get()));
    PQclear(PQexec(conn_.get(), "SET client_min_messages = warning"));
  }
  // Runs sql (several statements allowed), fails the test on error, returns the last result's rows.
  Rows exec(const std::string& sql) {
    Rows rows;
    if (!PQsendQuery(conn_.get(), sql.c_str())) {
      ADD_FAILURE() << PQerrorMessage(conn_.get());
      return rows;
    }
    while (PGresult* r = PQgetResult(conn_.get())) {
      auto st = PQresultStatus(r);
      if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        ADD_FAILURE() << sql.substr(0, 200) << ": " << PQresultErrorMessage(r);
      } else if (st == PGRES_TUPLES_OK) {
        rows.clear();
        for (int i = 0; i < PQntuples(r); ++i) {
          rows.emplace_back();
          for (int j = 0; j < PQnfields(r); ++j)
            rows.back().push_back(PQgetisnull(r, i, j) ? std::nullopt : std::optional<std::string>(PQgetvalue(r, i, j)));
        }
      }
      PQclear(r);
    }
    return rows;
  }
  std::string value(const std::string& sql) {
    auto rows = exec(sql);
    if (rows.empty() || rows[0].empty() || !rows[0][0]) return "<null>";
    return *rows[0][0];
  }
  // One statement with text parameters (a capture or store statement as predrop sends it); the
  // caller checks the status.
  std::shared_ptr<PGresult> exec_params(const std::string& sql, const std::vector<std::optional<std::string>>& params) {
    std::vector<const char*> values;
    for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
    return std::shared_ptr<PGresult>(PQexecParams(conn_.get(), sql.c_str(), static_cast<int>(values.size()), nullptr,
                                                  values.data(), nullptr, nullptr, 0),
                                     PQclear);
  }
  PGconn* raw() { return conn_.get(); }

 private:
  std::unique_ptr<PGconn, decltype(&PQfinish)> conn_;
};

// A database created for one test and dropped after it.
class TempDatabase {
 public:
  // encoding: the database's, with the C locale that any encoding accepts; empty: the cluster's.
  explicit TempDatabase(const std::string& prefix, const std::string& encoding = "") : name_(unique_name(prefix)) {
    Db("postgres").exec("CREATE DATABASE " + name_ +
                        (encoding.empty() ? "" : " TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C' ENCODING '" + encoding + "'"));
  }
  ~TempDatabase() {
    try {
      Db("postgres").exec("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
    } catch (...) {
    }
  }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
};

}  // namespace predrop::capture::testing
