// Where predrop listens (the client port and the admin endpoint): the host may be an address or a
// name, resolved once at start. A name binds every address it resolves to, as PostgreSQL's
// listen_addresses does: "localhost" is 127.0.0.1 and ::1 on many hosts, and a client that tries
// ::1 first must not find the port closed there. Failures say which setting, which address and
// why, instead of asio's "Invalid argument [system:22 at …]".
#pragma once

#include <boost/asio.hpp>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/policy.hpp"

namespace predrop::proxy {

// The addresses `where` names, without duplicates, in the resolver's order. Throws
// std::runtime_error naming `setting` (e.g. "listen", "admin") when a name does not resolve.
std::vector<boost::asio::ip::tcp::endpoint> listen_endpoints(const boost::asio::any_io_executor& ex,
                                                             const policy::Endpoint& where, std::string_view setting);

// One listening acceptor per address of `where`; all or none (a port taken on one of them stops
// predrop rather than leaving the other address served by whatever holds it). Throws
// std::runtime_error naming `setting` and the address that failed.
std::vector<boost::asio::ip::tcp::acceptor> open_listeners(const boost::asio::any_io_executor& ex,
                                                           const policy::Endpoint& where, std::string_view setting,
                                                           int backlog);

// open_listeners' second half, for a list already resolved; `label` names each address in errors.
std::vector<boost::asio::ip::tcp::acceptor> bind_listeners(
    const boost::asio::any_io_executor& ex, const std::vector<boost::asio::ip::tcp::endpoint>& endpoints,
    const std::function<std::string(const boost::asio::ip::tcp::endpoint&)>& label, int backlog);

}  // namespace predrop::proxy
