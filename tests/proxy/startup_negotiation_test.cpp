// The startup's negotiation (proxy/startup_negotiation.hpp) as a table: sequences of packet codes,
// each with the step the server's order gives it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "proxy/startup_negotiation.hpp"

namespace {

using predrop::proxy::StartupNegotiation;
using Step = StartupNegotiation::Step;
namespace wire = predrop::proxy::wire;

constexpr uint32_t kSsl = wire::kSslRequestCode;
constexpr uint32_t kGss = wire::kGssEncRequestCode;
constexpr uint32_t kCancel = wire::kCancelRequestCode;
constexpr uint32_t kV3 = 3u << 16;
constexpr uint32_t kTls = 0;   // not a code: the SSLRequest's 'S' answered, TLS begins

struct Row {
  const char* what;
  std::vector<uint32_t> codes;   // kTls marks where TLS begins
  std::vector<Step> steps;       // one per code
};

const Row kRows[] = {
    {"a plain startup", {kV3}, {Step::startup}},
    {"SSL answered 'N', then the startup", {kSsl, kV3}, {Step::answer_ssl, Step::startup}},
    {"SSL answered 'S', then the startup inside TLS", {kSsl, kTls, kV3}, {Step::answer_ssl, Step::startup}},
    {"SSLRequest twice", {kSsl, kSsl}, {Step::answer_ssl, Step::repeated}},
    {"GSSENCRequest twice", {kGss, kGss}, {Step::answer_gss, Step::repeated}},
    {"GSS refused, then SSL, then the startup", {kGss, kSsl, kV3}, {Step::answer_gss, Step::answer_ssl, Step::startup}},
    {"SSL then GSS, both before TLS", {kSsl, kGss}, {Step::answer_ssl, Step::answer_gss}},
    {"GSS inside TLS", {kSsl, kTls, kGss}, {Step::answer_ssl, Step::repeated}},
    {"SSL inside TLS", {kSsl, kTls, kSsl}, {Step::answer_ssl, Step::repeated}},
    {"a CancelRequest first", {kCancel}, {Step::cancel}},
    {"a CancelRequest after SSL", {kSsl, kCancel}, {Step::answer_ssl, Step::cancel}},
    {"a CancelRequest inside TLS", {kSsl, kTls, kCancel}, {Step::answer_ssl, Step::cancel}},
    {"an unknown protocol (4.0)", {4u << 16}, {Step::startup}},
    {"the code past GSSENCRequest (1234.5681)", {kGss + 1}, {Step::startup}},
    {"protocol 2", {2u << 16}, {Step::startup}},
};

TEST(StartupNegotiation, EachPacketTakesTheServersStep) {
  for (const Row& row : kRows) {
    StartupNegotiation n;
    std::vector<Step> got;
    for (uint32_t code : row.codes) {
      if (code == kTls) n.tls_begun();
      else got.push_back(n.on_packet(code));
    }
    EXPECT_EQ(got, row.steps) << row.what;
  }
}

TEST(StartupNegotiation, ARepeatIsRefusedUnderItsOwnCode) {
  StartupNegotiation ssl;
  EXPECT_EQ(ssl.refused_code(), 0u);
  ssl.on_packet(kSsl);
  EXPECT_EQ(ssl.refused_code(), 0u);
  ssl.on_packet(kSsl);
  EXPECT_EQ(ssl.refused_code(), kSsl);
  StartupNegotiation gss;
  gss.on_packet(kSsl);
  gss.tls_begun();
  gss.on_packet(kGss);
  EXPECT_EQ(gss.refused_code(), kGss);
}

TEST(StartupNegotiation, NegotiatedOnceAnyRequestWasAnswered) {
  StartupNegotiation n;
  EXPECT_FALSE(n.negotiated());
  n.on_packet(kCancel);
  EXPECT_FALSE(n.negotiated());
  n.on_packet(kGss);
  EXPECT_TRUE(n.negotiated());
  StartupNegotiation direct_tls;
  direct_tls.tls_begun();
  EXPECT_TRUE(direct_tls.negotiated());
  EXPECT_EQ(direct_tls.on_packet(kSsl), Step::repeated);
}

TEST(StartupNegotiation, BytesBehindAnSslRequestAreRefusedAfterTheHandshake) {
  StartupNegotiation n;
  n.on_packet(kSsl);
  EXPECT_FALSE(n.refuse_after_handshake());
  n.note_bytes_behind_ssl_request();
  EXPECT_TRUE(n.refuse_after_handshake());
}

}  // namespace
