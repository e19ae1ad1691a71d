#include "proxy/listen.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace predrop::proxy {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

std::vector<tcp::endpoint> listen_endpoints(const asio::any_io_executor& ex, const policy::Endpoint& where,
                                            std::string_view setting) {
  boost::system::error_code ec;
  if (auto address = asio::ip::make_address(where.host, ec); !ec) return {tcp::endpoint(address, where.port)};
  tcp::resolver resolver(ex);
  auto found = resolver.resolve(where.host, std::to_string(where.port), tcp::resolver::passive, ec);
  if (ec || found.empty())
    throw std::runtime_error(std::string(setting) + " " + where.to_string() + ": cannot resolve host '" + where.host +
                             "': " + (ec ? ec.message() : std::string("no address")));
  std::vector<tcp::endpoint> out;
  for (const auto& entry : found)
    if (std::find(out.begin(), out.end(), entry.endpoint()) == out.end()) out.push_back(entry.endpoint());
  return out;
}

std::vector<tcp::acceptor> open_listeners(const asio::any_io_executor& ex, const policy::Endpoint& where,
                                          std::string_view setting, int backlog) {
  std::string what = std::string(setting) + " " + where.to_string();
  // A name's errors also say which of its addresses failed.
  return bind_listeners(
      ex, listen_endpoints(ex, where, setting),
      [&](const tcp::endpoint& ep) {
        std::string address = ep.address().to_string();
        return address == where.host ? what : what + " (" + address + ")";
      },
      backlog);
}

std::vector<tcp::acceptor> bind_listeners(const asio::any_io_executor& ex, const std::vector<tcp::endpoint>& endpoints,
                                          const std::function<std::string(const tcp::endpoint&)>& label, int backlog) {
  std::vector<tcp::acceptor> acceptors;
  for (const auto& ep : endpoints) {
    boost::system::error_code ec;
    auto fail = [&](const char* step) { throw std::runtime_error(label(ep) + ": cannot " + step + ": " + ec.message()); };
    tcp::acceptor& a = acceptors.emplace_back(ex);
    a.open(ep.protocol(), ec);
    if (ec) fail("open a socket");
    a.set_option(tcp::acceptor::reuse_address(true), ec);
    if (ec) fail("set SO_REUSEADDR");
    // Beside an IPv4 address of the same name, an IPv6 socket takes IPv6 only (a wildcard would
    // otherwise claim the IPv4 port too).
    if (ep.address().is_v6() && endpoints.size() > 1) {
      a.set_option(asio::ip::v6_only(true), ec);
      if (ec) fail("set IPV6_V6ONLY");
    }
    a.bind(ep, ec);
    if (ec) fail("bind");
    a.listen(backlog, ec);
    if (ec) fail("listen");
  }
  return acceptors;
}

}  // namespace predrop::proxy
