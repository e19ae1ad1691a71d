#include "proxy/console_command.hpp"

#include <cctype>
#include <vector>

namespace predrop::proxy {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string_view trim(std::string_view text) {
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && (is_space(text.back()) || text.back() == ';')) text.remove_suffix(1);
  return text;
}

// The next word of text, which moves past it and the blanks after it.
std::string_view next_word(std::string_view& text) {
  size_t end = 0;
  while (end < text.size() && !is_space(text[end])) ++end;
  auto word = text.substr(0, end);
  text.remove_prefix(end);
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  return word;
}

std::string upper(std::string_view text) {
  std::string out(text);
  for (auto& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

ConsoleCommandLine parse_console_command(std::string_view query) {
  using Kind = ConsoleCommandLine::Kind;
  ConsoleCommandLine line;
  std::string_view rest = trim(query);
  line.text = std::string(rest);
  if (rest.empty()) return line;
  if (rest.find(';') != std::string_view::npos) {
    line.kind = Kind::several;
    return line;
  }
  std::string first = upper(next_word(rest));
  line.words = first;
  line.kind = Kind::other;
  auto no_arguments = [&](Kind k) { line.kind = rest.empty() ? k : Kind::extra_arguments; };
  if (first == "SHOW") {
    std::string what = upper(next_word(rest));
    if (!what.empty()) line.words += " " + what;
    if (what == "HOLDS") no_arguments(Kind::show_holds);
    else if (what == "SESSIONS") no_arguments(Kind::show_sessions);
    else if (what == "STATS") no_arguments(Kind::show_stats);
    else if (what == "CONFIG") no_arguments(Kind::show_config);
  } else if (first == "RELOAD") {
    no_arguments(Kind::reload);
  } else if (first == "BEGIN" || first == "START" || first == "COMMIT" || first == "END" || first == "ROLLBACK" ||
             first == "ABORT") {
    // "START TRANSACTION", "BEGIN ISOLATION LEVEL …", "COMMIT AND CHAIN": the server's tags name
    // only what happened; nothing here is transactional, so the words after do not matter.
    line.kind = Kind::transaction;
    line.tag = first == "START" ? "START TRANSACTION" : first == "END" ? "COMMIT" : first == "ABORT" ? "ROLLBACK" : first;
  }
  line.args = std::string(rest);
  return line;
}

std::vector<std::string> console_words(std::string_view text) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i])) ++i;
    if (i >= text.size()) break;
    std::string word;
    while (i < text.size() && !is_space(text[i])) {
      if (text[i] == '"') {
        word.push_back('"');
        for (++i; i < text.size(); ++i) {
          if (text[i] == '"' && i + 1 < text.size() && text[i + 1] == '"') {
            word += "\"\"";
            ++i;
          } else if (text[i] == '"') {
            break;
          } else {
            word.push_back(text[i]);
          }
        }
        word.push_back('"');
        ++i;
      } else {
        word.push_back(text[i++]);
      }
    }
    out.push_back(std::move(word));
  }
  return out;
}

}  // namespace predrop::proxy
