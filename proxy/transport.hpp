// A socket that may or may not speak TLS: the relay reads and writes without caring which.
#pragma once

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <memory>

#include "proxy/readiness.hpp"

namespace predrop::proxy {

class Transport {
 public:
  explicit Transport(tcp::socket socket) : socket_(std::move(socket)) {}
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  tcp::socket& socket() { return socket_; }
  RelaySocket& relay_socket() { return socket_; }
  bool is_tls() const { return static_cast<bool>(tls_); }
  asio::ssl::stream<tcp::socket&>* tls() { return tls_.get(); }
  asio::ssl::stream<tcp::socket&>& enable_tls(asio::ssl::context& ctx) {
    tls_ = std::make_unique<asio::ssl::stream<tcp::socket&>>(socket_, ctx);
    return *tls_;
  }
  template <class Buffers, class Handler>
  void async_read_some(const Buffers& b, Handler&& h) {
    if (tls_) tls_->async_read_some(b, std::forward<Handler>(h));
    else socket_.async_read_some(b, std::forward<Handler>(h));
  }
  template <class Buffers, class Handler>
  void async_write(const Buffers& b, Handler&& h) {
    if (tls_) asio::async_write(*tls_, b, std::forward<Handler>(h));
    else asio::async_write(socket_, b, std::forward<Handler>(h));
  }
  template <class Buffers, class Handler>
  void async_read_exactly(const Buffers& b, Handler&& h) {
    if (tls_) asio::async_read(*tls_, b, asio::transfer_all(), std::forward<Handler>(h));
    else asio::async_read(socket_, b, asio::transfer_all(), std::forward<Handler>(h));
  }
  void close() {
    boost::system::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
  }
  bool is_open() const { return socket_.is_open(); }

 private:
  RelaySocket socket_;
  std::unique_ptr<asio::ssl::stream<tcp::socket&>> tls_;
};

}  // namespace predrop::proxy
