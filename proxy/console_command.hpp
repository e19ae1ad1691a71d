// What a console Query says, read without any I/O (proxy/console.cpp acts on it; fuzz_console
// fuzzes it): one command per Query, its words case-insensitive, a trailing ';' allowed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace predrop::proxy {

struct ConsoleCommandLine {
  enum class Kind {
    empty,            // nothing but blanks and ';': EmptyQueryResponse
    several,          // a ';' inside: one command per Query
    show_holds,
    show_sessions,
    show_stats,
    show_config,
    reload,
    transaction,      // BEGIN, START, COMMIT, END, ROLLBACK, ABORT: answered, nothing done
    other,            // words names it (SHOW QUARANTINE, UNDROP, …): served outside proxy/, or unknown
    extra_arguments,  // a command above that takes none was given some
  };
  Kind kind = Kind::empty;
  std::string text;    // trimmed: what the log and an error repeat
  std::string words;   // upper case, one blank between: "SHOW QUARANTINE", "UNDROP", "BEGIN"
  std::string args;    // what follows the words, as typed (blanks around it removed)
  std::string tag;     // transaction: the CommandComplete tag the server would send
};

ConsoleCommandLine parse_console_command(std::string_view query);

// A command's arguments as words, split at blanks; a double-quoted word keeps its blanks and its
// quotes ("a b".c stays one word, as capture::split_qualified reads names).
std::vector<std::string> console_words(std::string_view text);

}  // namespace predrop::proxy
