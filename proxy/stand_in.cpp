#include "proxy/stand_in.hpp"

#include "proxy/wire.hpp"

namespace predrop::proxy {

namespace {

std::string messages_for(char held_type, std::string_view sql) {
  std::string out;
  if (held_type == 'Q') {
    std::string body(sql);
    body.push_back('\0');
    wire::append_message(out, 'Q', body);
    return out;
  }
  std::string parse;
  parse.push_back('\0');   // the unnamed statement
  parse.append(sql);
  parse.push_back('\0');
  parse.append("\0\0", 2);   // no parameter types
  wire::append_message(out, 'P', parse);
  // Unnamed portal of the unnamed statement: no parameter formats, no parameters, no result formats.
  wire::append_message(out, 'B', std::string_view("\0\0\0\0\0\0\0\0", 8));
  // Unnamed portal, no row limit.
  wire::append_message(out, 'E', std::string_view("\0\0\0\0\0", 5));
  return out;
}

}  // namespace

std::string raise_sql(std::string_view sqlstate, std::string_view message) {
  std::string literal = wire::e_literal(message);
  std::string tag = "$predrop$";
  for (int n = 0; literal.find(tag) != std::string::npos; ++n) tag = "$predrop" + std::to_string(n) + "$";
  return "DO " + tag + "BEGIN RAISE EXCEPTION USING ERRCODE = '" + std::string(sqlstate) + "', MESSAGE = " + literal +
         "; END" + tag;
}

StandIn refusal_stand_in(char held_type, std::string_view sqlstate, std::string_view message) {
  StandIn s;
  s.kind = StandIn::Kind::refusal;
  s.bytes = messages_for(held_type, raise_sql(sqlstate, message));
  return s;
}

StandIn substitute_stand_in(char held_type, std::string_view sql, std::shared_ptr<const Substitutes> substitutes) {
  StandIn s;
  s.kind = StandIn::Kind::substitute;
  s.bytes = messages_for(held_type, sql);
  s.substitutes = std::move(substitutes);
  return s;
}

StandInReply stand_in_reply(const BackendEvent& ev, char* msg, size_t total) {
  if (ev.substitute && msg[0] == 'C') return {wire::command_complete(ev.substitute->tag), total};
  if (ev.substitute) total = wire::remove_substitute_context(msg, total, ev.substitute->text);
  if (ev.refusal_error) total = wire::remove_error_field(msg, total, 'W');
  return {std::nullopt, total};
}

}  // namespace predrop::proxy
