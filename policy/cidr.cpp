// Address parsing is inet_pton's (strict: no "10.1", no leading zeros in IPv6 groups); the rest is bit masks.
#include "policy/cidr.hpp"

#include <arpa/inet.h>

#include <cstring>

namespace predrop::policy {

namespace {

struct Address {
  std::array<uint8_t, 16> bytes{};
  bool v6 = false;
};

std::optional<Address> parse_address(std::string_view text) {
  if (text.empty() || text.size() > 63) return std::nullopt;
  std::string s(text);
  Address a;
  if (inet_pton(AF_INET, s.c_str(), a.bytes.data()) == 1) return a;
  if (s.find(':') == std::string::npos) return std::nullopt;
  a.v6 = true;
  return inet_pton(AF_INET6, s.c_str(), a.bytes.data()) == 1 ? std::optional<Address>(a) : std::nullopt;
}

bool is_v4_mapped(const Address& a) {
  static constexpr uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return a.v6 && std::memcmp(a.bytes.data(), kPrefix, 12) == 0;
}

bool prefix_equal(const std::array<uint8_t, 16>& x, const std::array<uint8_t, 16>& y, int prefix) {
  int full = prefix / 8;
  if (std::memcmp(x.data(), y.data(), static_cast<std::size_t>(full)) != 0) return false;
  int rest = prefix % 8;
  if (rest == 0) return true;
  auto mask = static_cast<uint8_t>(0xFF << (8 - rest));
  return (x[static_cast<std::size_t>(full)] & mask) == (y[static_cast<std::size_t>(full)] & mask);
}

void clear_host_bits(std::array<uint8_t, 16>& bytes, int prefix, int width) {
  for (int bit = prefix; bit < width; ++bit) bytes[static_cast<std::size_t>(bit / 8)] &= static_cast<uint8_t>(~(0x80 >> (bit % 8)));
}

}  // namespace

bool Cidr::contains(std::string_view text) const {
  if (auto zone = text.find('%'); zone != std::string_view::npos) text = text.substr(0, zone);
  auto a = parse_address(text);
  if (!a) return false;
  if (is_v4_mapped(*a)) {
    Address v4;
    std::memcpy(v4.bytes.data(), a->bytes.data() + 12, 4);
    a = v4;
  }
  if (a->v6 != v6) return false;
  return prefix_equal(a->bytes, network, prefix);
}

std::string Cidr::to_string() const {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(v6 ? AF_INET6 : AF_INET, network.data(), buf, sizeof buf);
  return std::string(buf) + "/" + std::to_string(prefix);
}

std::optional<Cidr> parse_cidr(std::string_view text, std::string* error) {
  auto fail = [&](std::string why) -> std::optional<Cidr> {
    if (error) *error = std::move(why);
    return std::nullopt;
  };
  auto slash = text.find('/');
  std::string_view addr_text = text.substr(0, slash);
  auto a = parse_address(addr_text);
  if (!a) return fail("'" + std::string(addr_text) + "' is not an IPv4 or IPv6 address");
  const int width = a->v6 ? 128 : 32;
  int prefix = width;
  if (slash != std::string_view::npos) {
    std::string_view p = text.substr(slash + 1);
    if (p.empty() || p.size() > 3) return fail("prefix '/" + std::string(p) + "' is not a number 0.." + std::to_string(width));
    prefix = 0;
    for (char c : p) {
      if (c < '0' || c > '9') return fail("prefix '/" + std::string(p) + "' is not a number 0.." + std::to_string(width));
      prefix = prefix * 10 + (c - '0');
    }
    if (prefix > width) return fail("prefix /" + std::to_string(prefix) + " is above " + std::to_string(width));
  }
  Cidr c;
  c.network = a->bytes;
  c.v6 = a->v6;
  c.prefix = prefix;
  clear_host_bits(c.network, prefix, width);
  // A block written with host bits ("10.1.2.3/8") is most likely a typo for a narrower one.
  if (c.network != a->bytes) return fail("host bits are set after /" + std::to_string(prefix) + " (did you mean " + c.to_string() + "?)");
  return c;
}

}  // namespace predrop::policy
