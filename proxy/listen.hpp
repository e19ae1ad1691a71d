// Where predrop listens (the client port and the admin endpoint): the host may be an address or a
// name, resolved once at start. Failures say which setting, which address and why, instead of
// asio's "Invalid argument [system:22 at …]".
#pragma once

#include <boost/asio.hpp>
#include <string_view>

#include "policy/policy.hpp"

namespace predrop::proxy {

// Opens, binds and listens `acceptor` on `where`; returns the bound endpoint. Throws
// std::runtime_error naming `setting` (e.g. "listen", "admin") on failure.
boost::asio::ip::tcp::endpoint open_listener(boost::asio::ip::tcp::acceptor& acceptor, const policy::Endpoint& where,
                                             std::string_view setting, int backlog);

}  // namespace predrop::proxy
