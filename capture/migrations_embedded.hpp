// The numbered SQL files of migrations/, compiled into the binary (see embed_migrations.cmake).
#pragma once

#include <string>
#include <vector>

namespace predrop::capture {

struct EmbeddedMigration {
  int version;
  const char* name;
  const char* sql;  // with {{store_schema}}, {{store_table}} and {{ix:suffix}} placeholders
};

// In ascending version order.
const std::vector<EmbeddedMigration>& embedded_migrations();

}  // namespace predrop::capture
