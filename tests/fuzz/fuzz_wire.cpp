// The startup packet parser and the decoders predrop applies to server messages.
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <string>

#include "proxy/wire.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace predrop::proxy::wire;
  const char* p = reinterpret_cast<const char*>(data);
  if (auto sp = parse_startup(p, size)) {
    (void)sp->get("user");
    (void)setting_from_options(sp->get("options"), "search_path");
  }
  (void)parse_error_fields(p, size);
  (void)setting_from_options(std::string_view(p, size), "role");
  // strip_scram_plus works in place on a whole AuthenticationSASL message: give it one.
  std::string msg(9, '\0');
  msg[0] = 'R';
  write_u32(msg.data() + 5, 10);
  msg.append(p, size);
  write_u32(msg.data() + 1, static_cast<uint32_t>(msg.size() - 1));
  size_t n = strip_scram_plus(msg.data(), msg.size());
  if (n > msg.size() || read_u32(msg.data() + 1) != n - 1) __builtin_trap();
  // remove_error_field and remove_substitute_context edit a whole ErrorResponse / NoticeResponse in
  // place: the input's first byte picks the statement's length, the rest is the fields.
  if (size > 0) {
    size_t stmt_len = std::min<size_t>(data[0] % 16, size - 1);
    std::string statement(p + 1, stmt_len);
    for (char type : {'E', 'N'}) {
      std::string m(5, '\0');
      m[0] = type;
      m.append(p + 1 + stmt_len, size - 1 - stmt_len);
      write_u32(m.data() + 1, static_cast<uint32_t>(m.size() - 1));
      size_t k = remove_substitute_context(m.data(), m.size(), statement);
      if (k > m.size() || read_u32(m.data() + 1) != k - 1) __builtin_trap();
      k = remove_error_field(m.data(), k, 'W');
      if (read_u32(m.data() + 1) != k - 1) __builtin_trap();
    }
    // The server's refusal of a protocol, renamed: a whole ErrorResponse, or the raw bytes.
    std::string e(5, '\0');
    e[0] = 'E';
    e.append(p + 1 + stmt_len, size - 1 - stmt_len);
    write_u32(e.data() + 1, static_cast<uint32_t>(e.size() - 1));
    for (std::string_view reply : {std::string_view(e), std::string_view(p, size)}) {
      if (auto r = rename_refused_protocol(reply, "1234.0", "1234.5679")) {
        if (r->size() != reply.size() + 3 || read_u32(r->data() + 1) != r->size() - 1) __builtin_trap();
      }
    }
  }
  return 0;
}
