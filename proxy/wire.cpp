#include "proxy/wire.hpp"

namespace predrop::proxy::wire {

std::string StartupParams::get(std::string_view key) const {
  for (const auto& [k, v] : params)
    if (k == key) return v;
  return {};
}

std::optional<StartupParams> parse_startup(const char* data, size_t len) {
  if (len < 4) return std::nullopt;
  StartupParams out;
  out.protocol = read_u32(data);
  size_t pos = 4;
  // name\0value\0 ... \0
  while (pos < len) {
    if (data[pos] == '\0') {
      if (pos + 1 != len) return std::nullopt;  // bytes after the terminator
      return out;
    }
    const void* nul = std::memchr(data + pos, '\0', len - pos);
    if (!nul) return std::nullopt;
    size_t klen = static_cast<const char*>(nul) - (data + pos);
    std::string key(data + pos, klen);
    pos += klen + 1;
    if (pos >= len) return std::nullopt;
    nul = std::memchr(data + pos, '\0', len - pos);
    if (!nul) return std::nullopt;
    size_t vlen = static_cast<const char*>(nul) - (data + pos);
    out.params.emplace_back(std::move(key), std::string(data + pos, vlen));
    pos += vlen + 1;
  }
  return std::nullopt;  // no terminating NUL
}

namespace {
void put_field(std::string& out, char code, std::string_view value) {
  if (value.empty()) return;
  out.push_back(code);
  out.append(value);
  out.push_back('\0');
}
}  // namespace

std::string error_response(std::string_view severity, std::string_view sqlstate, std::string_view message,
                           std::string_view detail, std::string_view hint) {
  std::string out(5, '\0');
  out[0] = 'E';
  put_field(out, 'S', severity);
  put_field(out, 'V', severity);
  put_field(out, 'C', sqlstate);
  put_field(out, 'M', message);
  put_field(out, 'D', detail);
  put_field(out, 'H', hint);
  out.push_back('\0');
  write_u32(out.data() + 1, static_cast<uint32_t>(out.size() - 1));
  return out;
}

std::string ready_for_query(char status) {
  std::string out = {'Z', 0, 0, 0, 5, status};
  return out;
}

ErrorFields parse_error_fields(const char* body, size_t len) {
  ErrorFields f;
  size_t pos = 0;
  while (pos < len && body[pos] != '\0') {
    char code = body[pos++];
    const void* nul = std::memchr(body + pos, '\0', len - pos);
    if (!nul) break;
    size_t vlen = static_cast<const char*>(nul) - (body + pos);
    std::string_view v(body + pos, vlen);
    if (code == 'V' || (code == 'S' && f.severity.empty())) f.severity = std::string(v);
    else if (code == 'C') f.sqlstate = std::string(v);
    else if (code == 'M') f.message = std::string(v);
    pos += vlen + 1;
  }
  return f;
}

namespace {
// Removes msg[from, to) from a message and rewrites its length word; returns the new length.
size_t cut_bytes(char* msg, size_t len, size_t from, size_t to) {
  std::memmove(msg + from, msg + to, len - to);
  len -= to - from;
  write_u32(msg + 1, static_cast<uint32_t>(len - 1));
  return len;
}

// The first field `code` of an ErrorResponse or NoticeResponse at or after `from`: [start, end)
// covers its code byte, its value and the value's NUL. None in a malformed message.
struct FieldSpan {
  size_t start, end;
};
std::optional<FieldSpan> find_error_field(const char* msg, size_t len, char code, size_t from) {
  if (len < kHeaderLen + 1 || (msg[0] != 'E' && msg[0] != 'N')) return std::nullopt;
  for (size_t pos = from; pos < len && msg[pos] != '\0';) {
    const void* nul = std::memchr(msg + pos + 1, '\0', len - pos - 1);
    if (!nul) return std::nullopt;
    size_t end = static_cast<size_t>(static_cast<const char*>(nul) - msg) + 1;
    if (msg[pos] == code) return FieldSpan{pos, end};
    pos = end;
  }
  return std::nullopt;
}
}  // namespace

size_t strip_scram_plus(char* msg, size_t len) {
  static constexpr std::string_view kPlus = "SCRAM-SHA-256-PLUS";
  if (len < 9 || msg[0] != 'R' || read_u32(msg + 5) != 10) return len;
  size_t pos = 9;
  while (pos < len && msg[pos] != '\0') {
    const void* nul = std::memchr(msg + pos, '\0', len - pos);
    if (!nul) return len;
    size_t n = static_cast<const char*>(nul) - (msg + pos);
    if (std::string_view(msg + pos, n) == kPlus) {
      len = cut_bytes(msg, len, pos, pos + n + 1);
      continue;
    }
    pos += n + 1;
  }
  return len;
}

size_t remove_error_field(char* msg, size_t len, char code) {
  size_t from = kHeaderLen;
  while (auto f = find_error_field(msg, len, code, from)) {
    len = cut_bytes(msg, len, f->start, f->end);
    from = f->start;   // the next field now starts where this one did
  }
  return len;
}

size_t remove_substitute_context(char* msg, size_t len, std::string_view statement) {
  auto f = find_error_field(msg, len, 'W', kHeaderLen);
  if (!f) return len;
  // The value is msg[start+1, end-1). The server quotes the statement whole in its line
  // ("SQL statement \"…\"", translated), and the DO's line follows it.
  std::string_view value(msg + f->start + 1, f->end - 1 - (f->start + 1));
  std::string quoted;
  quoted.reserve(statement.size() + 3);
  quoted.append("\"").append(statement).append("\"\n");
  size_t at = value.rfind(quoted);
  if (at == std::string_view::npos) return len;
  size_t line = value.rfind('\n', at);
  if (line == std::string_view::npos || line == 0) return cut_bytes(msg, len, f->start, f->end);   // the whole field
  // From the newline before our line to the end of the value; the field's NUL stays.
  return cut_bytes(msg, len, f->start + 1 + line, f->end - 1);
}

std::optional<std::string> rename_refused_protocol(std::string_view reply, std::string_view from, std::string_view to) {
  if (reply.size() < kHeaderLen + 1 || reply[0] != 'E' || read_u32(reply.data() + 1) != reply.size() - 1 || from.empty()) {
    return std::nullopt;
  }
  auto m = find_error_field(reply.data(), reply.size(), 'M', kHeaderLen);
  if (!m) return std::nullopt;
  size_t at = reply.substr(m->start + 1, m->end - 1 - (m->start + 1)).find(from);
  if (at == std::string_view::npos) return std::nullopt;
  at += m->start + 1;
  std::string out;
  out.reserve(reply.size() + to.size());
  out.append(reply.substr(0, at)).append(to).append(reply.substr(at + from.size()));
  write_u32(out.data() + 1, static_cast<uint32_t>(out.size() - 1));
  return out;
}

void append_message(std::string& out, char type, std::string_view body) {
  char hdr[kHeaderLen];
  hdr[0] = type;
  write_u32(hdr + 1, static_cast<uint32_t>(body.size() + 4));
  out.append(hdr, kHeaderLen);
  out.append(body);
}

std::string e_literal(std::string_view text) {
  std::string out = "E'";
  for (char c : text) {
    if (c == '\'' || c == '\\') out.push_back(c);
    out.push_back(c);
  }
  return out + "'";
}

std::string startup_packet(const StartupParams& startup) {
  std::string m(8, '\0');
  write_u32(m.data() + 4, startup.protocol);
  for (const auto& [key, value] : startup.params) {
    m.append(key).push_back('\0');
    m.append(value).push_back('\0');
  }
  m.push_back('\0');
  write_u32(m.data(), static_cast<uint32_t>(m.size()));
  return m;
}

std::string row_description(const std::vector<std::string>& columns) {
  std::string m(kHeaderLen, '\0');
  m[0] = 'T';
  char n[2] = {static_cast<char>(columns.size() >> 8), static_cast<char>(columns.size() & 0xFF)};
  m.append(n, 2);
  for (const auto& name : columns) {
    m.append(name).push_back('\0');
    char field[18] = {};
    write_u32(field + 6, 25);                 // type text, table 0, column 0
    field[10] = field[11] = '\xFF';            // typlen -1
    write_u32(field + 12, 0xFFFFFFFFu);       // typmod -1; format 0 (text)
    m.append(field, 18);
  }
  write_u32(m.data() + 1, static_cast<uint32_t>(m.size() - 1));
  return m;
}

std::string data_row(const std::vector<std::optional<std::string>>& values) {
  std::string m(kHeaderLen, '\0');
  m[0] = 'D';
  char n[2] = {static_cast<char>(values.size() >> 8), static_cast<char>(values.size() & 0xFF)};
  m.append(n, 2);
  for (const auto& v : values) {
    char len[4];
    write_u32(len, v ? static_cast<uint32_t>(v->size()) : 0xFFFFFFFFu);
    m.append(len, 4);
    if (v) m.append(*v);
  }
  write_u32(m.data() + 1, static_cast<uint32_t>(m.size() - 1));
  return m;
}

std::string command_complete(std::string_view tag) {
  std::string m(kHeaderLen, '\0');
  m[0] = 'C';
  m.append(tag);
  m.push_back('\0');
  write_u32(m.data() + 1, static_cast<uint32_t>(m.size() - 1));
  return m;
}

std::optional<std::string> setting_from_options(std::string_view options, std::string_view setting_name) {
  // The server splits options on unescaped whitespace; "\ " keeps a space.
  std::vector<std::string> args;
  std::string cur;
  bool escaped = false;
  for (char c : options) {
    if (escaped) {
      cur.push_back(c);
      escaped = false;
    } else if (c == '\\') {
      escaped = true;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (!cur.empty()) args.push_back(std::move(cur)), cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  if (!cur.empty()) args.push_back(std::move(cur));
  std::optional<std::string> found;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view a = args[i];
    std::string_view setting;
    if (a == "-c" && i + 1 < args.size()) setting = args[++i];
    else if (a.starts_with("-c")) setting = a.substr(2);
    else if (a.starts_with("--")) setting = a.substr(2);
    else continue;
    auto eq = setting.find('=');
    if (eq == std::string_view::npos) continue;
    std::string name(setting.substr(0, eq));
    for (auto& ch : name) if (ch == '-') ch = '_';
    for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (name == setting_name) found = std::string(setting.substr(eq + 1));
  }
  return found;
}

}  // namespace predrop::proxy::wire
