// `predrop ddl`: the CREATE TABLE that recreates a snapshot's captured shape. Pure text.
#pragma once

#include <string>

#include "evidence/diff.hpp"

namespace predrop::cli {

// Quoted only where needed, exactly as the server's quote_ident() decides.
std::string quote_ident_if_needed(const std::string& name);
// Types as captured, columns by ordinal; name_override is [SCHEMA.]TABLE or "".
std::string create_table_ddl(const evidence::StoredSnapshot& s, const std::string& name_override);

}  // namespace predrop::cli
