// Client address ranges of rules: one address or a CIDR block, IPv4 or IPv6.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace predrop::policy {

struct Cidr {
  std::array<uint8_t, 16> network{};   // IPv4 in the first 4 bytes
  bool v6 = false;
  int prefix = 0;                      // 0..32 or 0..128

  // An IPv4 block matches IPv4 clients only, an IPv6 block IPv6 clients only; an IPv4-mapped
  // IPv6 address (::ffff:a.b.c.d, what a dual-stack listener reports for an IPv4 client) is
  // the IPv4 client it stands for. A zone (fe80::1%eth0) is ignored. Text that is not an
  // address matches nothing.
  bool contains(std::string_view address) const;
  std::string to_string() const;
};

// "10.0.0.0/8", "::1", "2001:db8::/32"; nullopt with *error set ("prefix /33 is above 32",
// "host bits set: did you mean 10.0.0.0/8?") when the text is not one.
std::optional<Cidr> parse_cidr(std::string_view text, std::string* error = nullptr);

}  // namespace predrop::policy
