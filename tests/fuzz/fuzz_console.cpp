// The console's reading of a Query (proxy/console_command.hpp) and the rows it answers with
// (wire::row_description, wire::data_row, wire::startup_packet): whatever an operator types.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "proxy/console_command.hpp"
#include "proxy/wire.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace predrop::proxy;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto line = parse_console_command(text);
  // The trimmed text is part of the query; the arguments are the end of it; words are upper case.
  if (text.find(line.text) == std::string_view::npos) __builtin_trap();
  if (line.text.size() < line.args.size() || line.text.compare(line.text.size() - line.args.size(), line.args.size(), line.args) != 0)
    __builtin_trap();
  for (char c : line.words)
    if (c >= 'a' && c <= 'z') __builtin_trap();
  using Kind = ConsoleCommandLine::Kind;
  if (line.kind == Kind::empty && !line.text.empty()) __builtin_trap();
  if ((line.kind == Kind::show_holds || line.kind == Kind::reload) && !line.args.empty()) __builtin_trap();
  for (const auto& w : console_words(line.args))
    if (w.empty()) __builtin_trap();

  // Each byte run up to a NUL is a column name and a value: the messages must frame themselves.
  std::vector<std::string> columns;
  std::vector<std::optional<std::string>> values;
  size_t start = 0;
  for (size_t i = 0; i <= size && columns.size() < 64; ++i) {
    if (i == size || data[i] == 0) {
      std::string piece(text.substr(start, i - start));
      columns.push_back(piece);
      values.push_back(piece.size() % 3 == 0 ? std::nullopt : std::optional<std::string>(piece));
      start = i + 1;
    }
  }
  auto t = wire::row_description(columns);
  if (wire::read_u32(t.data() + 1) != t.size() - 1) __builtin_trap();
  auto d = wire::data_row(values);
  if (wire::read_u32(d.data() + 1) != d.size() - 1) __builtin_trap();
  // A startup built from parameters without NULs in them reads back as the same parameters.
  wire::StartupParams p;
  p.protocol = wire::kProtocol3;
  for (size_t i = 0; i + 1 < columns.size(); i += 2)
    if (!columns[i].empty()) p.params.emplace_back(columns[i], columns[i + 1]);
  auto packet = wire::startup_packet(p);
  auto back = wire::parse_startup(packet.data() + 4, packet.size() - 4);
  if (!back || back->params != p.params) __builtin_trap();
  return 0;
}
