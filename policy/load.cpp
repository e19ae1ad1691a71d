// The public loaders: each runs the sources in order (file, environment, secrets, cross-key
// checks) on one LoadContext and hands back either a config or every error found.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "policy/load_context.hpp"

namespace predrop::policy {

namespace {

LoadResult finish(detail::LoadContext& ctx) {
  detail::apply_environment(ctx);
  detail::resolve_secrets(ctx);
  detail::check_across_keys(ctx);
  if (!ctx.errors.empty()) return {nullptr, std::move(ctx.errors)};
  return {std::make_shared<const Config>(std::move(ctx.config)), {}};
}

}  // namespace

std::string ConfigError::to_string() const {
  std::string out = file;
  if (line > 0) out += ":" + std::to_string(line) + ":" + std::to_string(column);
  if (!out.empty()) out += ": ";
  return out + message;
}

LoadResult load_string(std::string_view yaml, const std::string& name) {
  detail::LoadContext ctx;
  ctx.file = name;
  detail::apply_yaml_text(ctx, yaml);
  return finish(ctx);
}

LoadResult load_file(const std::string& path) {
  detail::LoadContext ctx;
  ctx.file = path;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ctx.error({path, 0, 0}, "cannot read the config file: " + std::string(std::strerror(errno)));
    return {nullptr, std::move(ctx.errors)};
  }
  std::ostringstream text;
  text << in.rdbuf();
  // Relative paths inside the file mean "next to the file", whatever the working directory.
  std::error_code ec;
  auto dir = std::filesystem::absolute(path, ec).parent_path();
  if (!ec) ctx.base_dir = dir.string();
  detail::apply_yaml_text(ctx, text.str());
  return finish(ctx);
}

LoadResult load_defaults() {
  detail::LoadContext ctx;
  ctx.file = "<defaults>";
  return finish(ctx);
}

}  // namespace predrop::policy
