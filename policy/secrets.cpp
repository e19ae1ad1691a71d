// Where the capture and store conninfo come from: the value itself, or a file holding it (a
// mounted secret). The later source wins (environment over file); both in one source is an error
// because it is unclear which password was meant.
#include <fstream>
#include <sstream>

#include "policy/load_context.hpp"
#include "policy/value_text.hpp"

namespace predrop::policy::detail {

namespace {

void resolve(LoadContext& ctx, const std::string& section, std::string& conninfo, std::string& file) {
  const std::string value_key = section + ".conninfo";
  const std::string file_key = section + ".conninfo_file";
  if (!conninfo.empty() && !file.empty()) {
    const Origin value_at = ctx.origin_of(value_key);
    const Origin file_at = ctx.origin_of(file_key);
    if (value_at.from_environment() == file_at.from_environment()) {
      ctx.error(file_at, file_key + ": set either " + value_key + " or " + file_key + ", not both");
      return;
    }
    if (value_at.from_environment()) {
      file.clear();
      return;
    }
    // file_at is the environment: it outranks the file's conninfo, read below.
  }
  if (file.empty()) return;
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    ctx.error(ctx.origin_of(file_key), file_key + ": cannot read '" + file + "'");
    return;
  }
  std::ostringstream text;
  text << in.rdbuf();
  conninfo = trim(text.str());   // a trailing newline from `echo > file` is not part of the password
  if (conninfo.empty()) ctx.error(ctx.origin_of(file_key), file_key + ": '" + file + "' is empty");
}

}  // namespace

void resolve_secrets(LoadContext& ctx) {
  resolve(ctx, "capture", ctx.config.capture_conninfo, ctx.config.capture_conninfo_file);
  resolve(ctx, "store", ctx.config.store_conninfo, ctx.config.store_conninfo_file);
}

}  // namespace predrop::policy::detail
