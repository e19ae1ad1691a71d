// The running config behind a mutex; SIGHUP reloads swap it whole, so a reader sees either the
// old config or the new one, never a mixture.
#include "policy/keys.hpp"

namespace predrop::policy {

std::vector<std::string> keep_restart_keys(Config& next, const Config& running) {
  std::vector<std::string> changed;
  for (const auto& spec : detail::config_keys()) {
    if (spec.reload != ReloadBehaviour::restart) continue;
    const bool differs = spec.shape == detail::Shape::list ? spec.get_list(next) != spec.get_list(running)
                                                           : spec.get(next) != spec.get(running);
    if (differs) changed.push_back(spec.name);
    spec.copy(next, running);
  }
  return changed;
}

PolicyHolder::PolicyHolder(std::shared_ptr<const Config> initial, Overrides overrides)
    : current_(initial ? std::move(initial) : std::make_shared<const Config>()), overrides_(std::move(overrides)) {}

std::shared_ptr<const Config> PolicyHolder::current() const {
  std::lock_guard lock(mutex_);
  return current_;
}

ReloadResult PolicyHolder::reload(const std::string& path) {
  std::lock_guard reload_lock(reload_mutex_);
  ReloadResult result;
  LoadResult loaded = load_file(path);
  if (!loaded.errors.empty()) {
    ++reloads_failed_;
    result.errors = std::move(loaded.errors);
    return result;
  }
  auto next = std::make_shared<Config>(*loaded.config);
  if (overrides_) overrides_(*next);
  const auto running = current();
  // Listeners, pools and TLS contexts are built once; keep their running values and say which
  // ones the file changed, rather than pretend they took effect.
  result.restart_required = keep_restart_keys(*next, *running);
  {
    std::lock_guard lock(mutex_);
    current_ = std::move(next);
  }
  ++reloads_ok_;
  result.ok = true;
  return result;
}

}  // namespace predrop::policy
