# Writes OUT (a .cpp) holding every migrations/NNNN_name.sql as a raw string, in file-name order,
# so `predrop migrate` needs no files on disk. Run by capture/CMakeLists.txt at build time:
#   cmake -DMIGRATIONS_DIR=... -DOUT=... -P embed_migrations.cmake
file(GLOB files "${MIGRATIONS_DIR}/*.sql")
list(SORT files)
set(body "")
foreach(f IN LISTS files)
  get_filename_component(name "${f}" NAME)
  if(NOT name MATCHES "^([0-9]+)_.*\\.sql$")
    message(FATAL_ERROR "migration ${name} is not named NNNN_description.sql")
  endif()
  math(EXPR version "${CMAKE_MATCH_1}")
  file(READ "${f}" sql)
  if(sql MATCHES "\\)predrop_sql\"")
    message(FATAL_ERROR "migration ${name} contains the raw-string delimiter")
  endif()
  string(APPEND body "  {${version}, \"${name}\", R\"predrop_sql(${sql})predrop_sql\"},\n")
endforeach()
set(content "// Generated from migrations/*.sql by capture/embed_migrations.cmake. Do not edit.
#include \"capture/migrations_embedded.hpp\"
namespace predrop::capture {
const std::vector<EmbeddedMigration>& embedded_migrations() {
  static const std::vector<EmbeddedMigration> all = {
${body}  };
  return all;
}
}  // namespace predrop::capture
")
# Only touch the file when it changes, so an unchanged migration set recompiles nothing.
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT "${old}" STREQUAL "${content}")
  file(WRITE "${OUT}" "${content}")
endif()
