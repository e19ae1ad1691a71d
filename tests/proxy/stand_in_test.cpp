// A stand-in (proxy/stand_in.hpp): the bytes sent in place of a held message, and what the server's
// replies to it become for the client. How the decoder's owed replies follow a stand-in is in
// decoder_test.cpp (the InjectedRefusal and Substitute tests).
#include <gtest/gtest.h>

#include <memory>

#include "decoder_test_util.hpp"
#include "proxy/stand_in.hpp"

namespace dectest {
namespace {

// The frontend messages of a stand-in: type and body of each, and whether the lengths add up.
std::vector<std::pair<char, std::string>> split_messages(const std::string& bytes, bool& whole) {
  std::vector<std::pair<char, std::string>> out;
  size_t at = 0;
  whole = true;
  while (at < bytes.size()) {
    if (bytes.size() - at < 5) return whole = false, out;
    uint32_t len = wire::read_u32(bytes.data() + at + 1);
    if (len < 4 || bytes.size() - at - 1 < len) return whole = false, out;
    out.emplace_back(bytes[at], bytes.substr(at + 5, len - 4));
    at += 1 + len;
  }
  return out;
}


TEST(StandIn, ARefusalOfAQueryIsOneQueryRaisingTheError) {
  StandIn s = refusal_stand_in('Q', "57014", "canceling statement due to user request");
  EXPECT_EQ(s.kind, StandIn::Kind::refusal);
  bool whole = false;
  auto ms = split_messages(s.bytes, whole);
  ASSERT_TRUE(whole);
  ASSERT_EQ(ms.size(), 1u);
  EXPECT_EQ(ms[0].first, 'Q');
  EXPECT_EQ(ms[0].second, raise_sql("57014", "canceling statement due to user request") + std::string(1, '\0'));
}

TEST(StandIn, ARefusalOfAnExecuteIsParseBindExecuteOfTheUnnamedStatement) {
  StandIn s = refusal_stand_in('E', "55000", "predrop: refused");
  bool whole = false;
  auto ms = split_messages(s.bytes, whole);
  ASSERT_TRUE(whole);
  ASSERT_EQ(ms.size(), 3u);
  EXPECT_EQ(ms[0].first, 'P');
  EXPECT_EQ(ms[0].second, std::string(1, '\0') + raise_sql("55000", "predrop: refused") + std::string(3, '\0'));
  EXPECT_EQ(ms[1].first, 'B');
  EXPECT_EQ(ms[1].second, std::string(8, '\0'));
  EXPECT_EQ(ms[2].first, 'E');
  EXPECT_EQ(ms[2].second, std::string(5, '\0'));
}

TEST(StandIn, AMessageCannotEndTheRaiseEarly) {
  // The client names the table: a name that closes the literal or the dollar quote stays inside both.
  std::string sql = raise_sql("55000", "refused DROP of public.\"x'; END $predrop$ --\\\"");
  EXPECT_EQ(sql.find("DO $predrop0$"), 0u);
  EXPECT_EQ(sql.substr(sql.size() - std::string("END$predrop0$").size()), "END$predrop0$");
  EXPECT_NE(sql.find("x''; END $predrop$ --\\\\"), std::string::npos);
}

TEST(StandIn, ASubstituteCarriesItsStatementsToTheDecoder) {
  auto subs = std::make_shared<const Substitutes>(1);
  StandIn s = substitute_stand_in('Q', "DO $q$BEGIN NULL; END$q$", subs);
  EXPECT_EQ(s.kind, StandIn::Kind::substitute);
  EXPECT_EQ(s.substitutes, subs);
  bool whole = false;
  auto ms = split_messages(s.bytes, whole);
  ASSERT_TRUE(whole);
  ASSERT_EQ(ms.size(), 1u);
  EXPECT_EQ(ms[0].second, std::string("DO $q$BEGIN NULL; END$q$") + std::string(1, '\0'));
}

// A refusal's ErrorResponse, with this context field (W), or none for "".
std::string refusal_error(std::string_view context) {
  std::vector<std::string> fields{"SERROR", "C55000", "Mpredrop: refused"};
  if (!context.empty()) fields.push_back("W" + std::string(context));
  return error_fields(fields);
}

// The reply as the client gets it: the replacement, or the message as edited in place.
struct ClientSees {
  bool replaced = false;
  std::string bytes;
};
ClientSees reply_to(const BackendEvent& ev, std::string msg) {
  StandInReply r = stand_in_reply(ev, msg.data(), msg.size());
  if (r.replacement) return {true, *r.replacement};
  return {false, msg.substr(0, r.total)};
}

const Substitute kDropVictim{0, "DROP TABLE", "DROP TABLE victim"};

TEST(StandInReply, ARefusalsErrorLosesTheContextOnlyTheStandInHas) {
  BackendEvent ev;
  ev.refusal_error = true;
  ClientSees r = reply_to(ev, refusal_error("PL/pgSQL function inline_code_block line 1 at RAISE"));
  EXPECT_FALSE(r.replaced);
  EXPECT_EQ(r.bytes, refusal_error(""));
}

TEST(StandInReply, ASubstitutesCommandCompleteBecomesTheStatementsTag) {
  BackendEvent ev;
  ev.substitute = &kDropVictim;
  ClientSees r = reply_to(ev, command_complete("DO"));
  EXPECT_TRUE(r.replaced);
  EXPECT_EQ(r.bytes, command_complete("DROP TABLE"));
}

TEST(StandInReply, ASubstitutesErrorLosesTheLinesNamingTheSubstitute) {
  BackendEvent ev;
  ev.substitute = &kDropVictim;
  ClientSees r = reply_to(ev, refusal_error("SQL function \"f\" statement 1\nSQL statement \"DROP TABLE victim\"\n"
                                            "PL/pgSQL function inline_code_block line 5 at EXECUTE"));
  EXPECT_FALSE(r.replaced);
  EXPECT_EQ(r.bytes, refusal_error("SQL function \"f\" statement 1"));
}

TEST(StandInReply, AnyOtherReplyIsLeftAsTheServerSentIt) {
  const std::string sent = refusal_error("PL/pgSQL function f() line 1 at RAISE");
  ClientSees r = reply_to(BackendEvent{}, sent);
  EXPECT_FALSE(r.replaced);
  EXPECT_EQ(r.bytes, sent);
}

}  // namespace
}  // namespace dectest
