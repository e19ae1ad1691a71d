#include "proxy/listen.hpp"

#include <stdexcept>
#include <string>

namespace predrop::proxy {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

tcp::endpoint open_listener(tcp::acceptor& acceptor, const policy::Endpoint& where, std::string_view setting,
                            int backlog) {
  std::string what = std::string(setting) + " " + where.to_string();
  boost::system::error_code ec;
  tcp::endpoint ep;
  if (auto address = asio::ip::make_address(where.host, ec); !ec) {
    ep = tcp::endpoint(address, where.port);
  } else {
    // A name (localhost, a pod's hostname): its first address, as a server binding a name would.
    tcp::resolver resolver(acceptor.get_executor());
    auto found = resolver.resolve(where.host, std::to_string(where.port), tcp::resolver::passive, ec);
    if (ec || found.empty())
      throw std::runtime_error(what + ": cannot resolve host '" + where.host + "': " +
                               (ec ? ec.message() : std::string("no address")));
    ep = found.begin()->endpoint();
    what += " (" + ep.address().to_string() + ")";
  }
  auto fail = [&](const char* step) { throw std::runtime_error(what + ": cannot " + step + ": " + ec.message()); };
  acceptor.open(ep.protocol(), ec);
  if (ec) fail("open a socket");
  acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (ec) fail("set SO_REUSEADDR");
  acceptor.bind(ep, ec);
  if (ec) fail("bind");
  acceptor.listen(backlog, ec);
  if (ec) fail("listen");
  return ep;
}

}  // namespace predrop::proxy
