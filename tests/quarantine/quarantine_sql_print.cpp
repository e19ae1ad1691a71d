// Test-only: prints the quarantine SQL of quarantine/move_sql.hpp, so the tests run exactly
// what the proxy runs, in sessions of their own.
//   quarantine_sql_print move [--schema Q] [--cascade] [--max-bytes N] [--function] [--schema-drop S]... [--real NAME]... NAME...
//     (--function: the call of the installed function, as the proxy sends it once the capture found it)
//   quarantine_sql_print prepare|catalog|check [--schema Q]
#include <cstring>
#include <iostream>
#include <string>

#include "quarantine/move_sql.hpp"

int main(int argc, char** argv) {
  using namespace predrop::quarantine;
  if (argc < 2) {
    std::cerr << "usage: quarantine_sql_print move|prepare|catalog [options] [NAME...]\n";
    return 2;
  }
  const std::string what = argv[1];
  QuarantineMove m;
  m.quarantine_schema = "predrop_quarantine";
  auto add = [&](const std::string& n, bool quarantine) {
    QuarantineTarget t;
    auto dot = n.find('.');
    if (dot == std::string::npos) t.table = n;
    else t.schema = n.substr(0, dot), t.table = n.substr(dot + 1);
    t.quarantine = quarantine;
    m.tables.push_back(t);
  };
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << a << " wants a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--schema") m.quarantine_schema = value();
    else if (a == "--cascade") m.cascade = true;
    else if (a == "--function") m.via_function = true;
    else if (a == "--max-bytes") m.max_bytes = std::stoull(value());
    else if (a == "--schema-drop") m.schemas.push_back(value());
    else if (a == "--real") add(value(), false);
    else add(a, true);
  }
  if (what == "move") std::cout << move_sql(m) << "\n";
  else if (what == "prepare") std::cout << prepare_sql(m.quarantine_schema) << "\n";
  else if (what == "catalog") std::cout << catalog_sql(m.quarantine_schema) << "\n";
  else if (what == "check") std::cout << move_function_check_sql() << "\n";
  else return 2;
  return 0;
}
