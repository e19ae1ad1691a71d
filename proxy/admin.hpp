// The admin endpoint (Boost.Beast): /metrics, /healthz, /readyz, /drops.
// Runs on its own thread so that a slow readiness probe never touches a relay loop.
#pragma once

#include <memory>

#include "policy/policy.hpp"
#include "proxy/context.hpp"

namespace predrop::proxy {

class AdminServer {
 public:
  AdminServer(ProxyContext& ctx, const policy::Endpoint& listen);
  ~AdminServer();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Prometheus text exposition of everything predrop counts.
std::string render_metrics(ProxyContext& ctx);

}  // namespace predrop::proxy
