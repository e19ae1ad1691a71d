// What a startup has negotiated before its startup packet, as one value instead of flags (issue 24).
// The server's order (PostgreSQL's ProcessStartupPacket): a CancelRequest is read at any time;
// SSLRequest and GSSENCRequest are answered once each, and neither inside TLS; a negotiation
// repeated is read as a protocol version the server does not speak. predrop conducts the
// negotiation itself (it owns the client's TLS), so it keeps this; proxy/startup.cpp does what
// each step says with the sockets. Pure: tests/proxy/startup_negotiation_test.cpp runs it as a table.
#pragma once

#include <cstdint>

#include "proxy/wire.hpp"

namespace predrop::proxy {

class StartupNegotiation {
 public:
  // What a packet is, given what came before it.
  enum class Step : uint8_t {
    cancel,           // a CancelRequest: it ends the connection
    answer_ssl,       // the first SSLRequest: 'S' or 'N' (answered_ssl records the answer)
    answer_gss,       // the first GSSENCRequest: 'N' (predrop has no GSSAPI encryption)
    repeated,         // a negotiation repeated: the server's refusal, renamed to its code
    startup,          // a startup packet (or what the server will refuse as one)
  };

  // Reads the packet's code and records what it negotiates.
  Step on_packet(uint32_t code) {
    if (code == wire::kCancelRequestCode) return Step::cancel;
    if (code == wire::kSslRequestCode && !ssl_answered_) {
      ssl_answered_ = true;
      return Step::answer_ssl;
    }
    if (code == wire::kGssEncRequestCode && !gss_answered_) {
      gss_answered_ = true;
      return Step::answer_gss;
    }
    if (code == wire::kSslRequestCode || code == wire::kGssEncRequestCode) {
      refused_code_ = code;
      return Step::repeated;
    }
    return Step::startup;
  }

  // The SSLRequest was answered 'S' (or the client began with TLS at once): as the server, no
  // negotiation follows inside TLS.
  void tls_begun() { ssl_answered_ = gss_answered_ = true; }

  // Bytes came behind an SSLRequest answered 'S': after the handshake the server refuses them.
  void note_bytes_behind_ssl_request() { refuse_after_handshake_ = true; }
  bool refuse_after_handshake() const { return refuse_after_handshake_; }

  // Whether anything was negotiated: the server complains of a cut-short length word only before.
  bool negotiated() const { return ssl_answered_ || gss_answered_; }

  // The code of a repeated negotiation (0: none), whose refusal the server gives for another code.
  uint32_t refused_code() const { return refused_code_; }

 private:
  bool ssl_answered_ = false;
  bool gss_answered_ = false;
  bool refuse_after_handshake_ = false;
  uint32_t refused_code_ = 0;
};

}  // namespace predrop::proxy
