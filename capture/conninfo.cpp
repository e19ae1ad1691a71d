#include "capture/conninfo.hpp"

#include <libpq-fe.h>

#include <regex>

#include "capture/capture.hpp"

namespace predrop::capture {

std::vector<const char*> ConnectParams::key_ptrs() const {
  std::vector<const char*> out;
  for (const auto& k : keys) out.push_back(k.c_str());
  out.push_back(nullptr);
  return out;
}

std::vector<const char*> ConnectParams::value_ptrs() const {
  std::vector<const char*> out;
  for (const auto& v : values) out.push_back(v.c_str());
  out.push_back(nullptr);
  return out;
}

ConnectParams connect_params(const std::string& base_conninfo, const std::string& dbname,
                             const std::string& application_name, const std::string& options) {
  ConnectParams p;
  std::string base_options;
  if (!base_conninfo.empty()) {
    char* err = nullptr;
    if (PQconninfoOption* opts = PQconninfoParse(base_conninfo.c_str(), &err)) {
      for (auto* o = opts; o->keyword; ++o)
        if (std::string(o->keyword) == "options" && o->val) base_options = o->val;
      PQconninfoFree(opts);
    }
    if (err) PQfreemem(err);
  }
  // Only the first dbname is expanded as a conninfo; a later dbname is a plain database name
  // and, being processed later, wins.
  p.keys.push_back("dbname");
  p.values.push_back(base_conninfo);
  if (!dbname.empty()) {
    p.keys.push_back("dbname");
    p.values.push_back(dbname);
  }
  if (!application_name.empty()) {
    p.keys.push_back("application_name");
    p.values.push_back(application_name);
  }
  std::string all_options = base_options.empty() ? options : base_options + " " + options;
  if (!all_options.empty()) {
    p.keys.push_back("options");
    p.values.push_back(all_options);
  }
  return p;
}

std::string mask_conninfo(const std::string& conninfo) {
  // key=value form: password = 'quoted \' value' or password=bare
  static const std::regex kv(R"((password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+))", std::regex::icase);
  // URI form: scheme://user:secret@host
  static const std::regex uri(R"(^(postgres(?:ql)?://[^:/@]*:)[^@/]*@)", std::regex::icase);
  // URI query parameter ?password=...
  static const std::regex query(R"(([?&]password=)[^&]*)", std::regex::icase);
  std::string out = std::regex_replace(conninfo, uri, "$1***@");
  out = std::regex_replace(out, query, "$1***");
  return std::regex_replace(out, kv, "$1***");
}

}  // namespace predrop::capture
