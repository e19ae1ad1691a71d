// The wire's edits and builders that predrop's own answers use: a server's refusal of one protocol
// code renamed to another (proxy/startup.cpp, a negotiation repeated), and what the console sends
// and reads (a startup packet, rows psql prints, its command words).
#include <gtest/gtest.h>

#include "decoder_test_util.hpp"
#include "proxy/console_command.hpp"

namespace dectest {
namespace {

using Strings = std::vector<std::string>;

// ---- the server's refusal of a protocol, renamed (proxy/startup.cpp: a negotiation repeated) ----


TEST(RenameRefusedProtocol, RenamesTheCodeAndKeepsEveryOtherByte) {
  using predrop::proxy::wire::rename_refused_protocol;
  auto server = error_fields({"SFATAL", "VFATAL", "C0A000", "Munsupported frontend protocol 1234.0: server supports 3.0 to 3.2",
                               "Fbackend_startup.c", "L752", "RProcessStartupPacket"});
  auto want = error_fields({"SFATAL", "VFATAL", "C0A000", "Munsupported frontend protocol 1234.5679: server supports 3.0 to 3.2",
                             "Fbackend_startup.c", "L752", "RProcessStartupPacket"});
  EXPECT_EQ(rename_refused_protocol(server, "1234.0", "1234.5679"), want);
  // A translation keeps the number, wherever the words put it.
  auto de = error_fields({"SFATAL", "C0A000", "Mnicht unterstütztes Frontend-Protokoll 1234.0: Server unterstützt 3.0 bis 3.0"});
  auto de_want = error_fields({"SFATAL", "C0A000", "Mnicht unterstütztes Frontend-Protokoll 1234.5680: Server unterstützt 3.0 bis 3.0"});
  EXPECT_EQ(rename_refused_protocol(de, "1234.0", "1234.5680"), de_want);
}

TEST(RenameRefusedProtocol, AnythingElseIsNotRenamed) {
  using predrop::proxy::wire::rename_refused_protocol;
  auto server = error_fields({"SFATAL", "C0A000", "Munsupported frontend protocol 1234.0: server supports 3.0 to 3.0"});
  EXPECT_EQ(rename_refused_protocol("", "1234.0", "1234.5679"), std::nullopt);
  EXPECT_EQ(rename_refused_protocol(server.substr(0, server.size() - 1), "1234.0", "1234.5679"), std::nullopt);   // cut short
  EXPECT_EQ(rename_refused_protocol(server + "N", "1234.0", "1234.5679"), std::nullopt);                        // bytes behind it
  EXPECT_EQ(rename_refused_protocol("N" + server.substr(1), "1234.0", "1234.5679"), std::nullopt);              // not an error
  auto other = error_fields({"SFATAL", "C28000", "Mno pg_hba.conf entry for host"});
  EXPECT_EQ(rename_refused_protocol(other, "1234.0", "1234.5679"), std::nullopt);
  auto in_detail = error_fields({"SFATAL", "C0A000", "Mwhatever", "D1234.0"});   // named only outside the message
  EXPECT_EQ(rename_refused_protocol(in_detail, "1234.0", "1234.5679"), std::nullopt);
  // Protocol 2's refusal: bare text, no length word.
  EXPECT_EQ(rename_refused_protocol("Eunsupported frontend protocol 1234.0: server supports 3.0 to 3.0\n", "1234.0", "1234.5679"),
            std::nullopt);
}

// What the console sends: a startup to the server, and rows psql reads.
TEST(ConsoleWire, StartupPacketRoundTrips) {
  namespace wire = predrop::proxy::wire;
  wire::StartupParams p;
  p.protocol = wire::kProtocol3;
  p.params = {{"user", "alice"}, {"database", "postgres"}, {"application_name", "psql"}};
  auto packet = wire::startup_packet(p);
  ASSERT_EQ(wire::read_u32(packet.data()), packet.size());
  auto back = wire::parse_startup(packet.data() + 4, packet.size() - 4);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->protocol, wire::kProtocol3);
  EXPECT_EQ(back->params, p.params);
}

TEST(ConsoleWire, RowDescriptionAndDataRow) {
  namespace wire = predrop::proxy::wire;
  auto t = wire::row_description({"stat", "value"});
  ASSERT_EQ(t[0], 'T');
  EXPECT_EQ(wire::read_u32(t.data() + 1), t.size() - 1);
  EXPECT_EQ(t.size(), 1 + 4 + 2 + 2 * 18 + std::string("stat").size() + 1 + std::string("value").size() + 1);
  EXPECT_EQ(t.substr(7, 5), std::string("stat\0", 5));
  EXPECT_EQ(wire::read_u32(t.data() + 12 + 6), 25u);   // text
  auto d = wire::data_row({std::string("a"), std::nullopt, std::string()});
  EXPECT_EQ(d, std::string("D\0\0\0\x13\0\x03\0\0\0\x01" "a" "\xff\xff\xff\xff" "\0\0\0\0", 20));
}

TEST(ConsoleCommand, WordsKindsAndArguments) {
  using predrop::proxy::parse_console_command;
  using Kind = predrop::proxy::ConsoleCommandLine::Kind;
  EXPECT_EQ(parse_console_command("  show   holds ;\n").kind, Kind::show_holds);
  EXPECT_EQ(parse_console_command("SHOW HOLDS").words, "SHOW HOLDS");
  EXPECT_EQ(parse_console_command("show stats now").kind, Kind::extra_arguments);
  EXPECT_EQ(parse_console_command(" ; ").kind, Kind::empty);
  EXPECT_EQ(parse_console_command("SHOW HOLDS; SHOW STATS").kind, Kind::several);
  auto undrop = parse_console_command("undrop public.t  AS \"x y\" IN db;");
  EXPECT_EQ(undrop.kind, Kind::other);
  EXPECT_EQ(undrop.words, "UNDROP");
  EXPECT_EQ(undrop.args, "public.t  AS \"x y\" IN db");
  auto quarantine = parse_console_command("Show Quarantine");
  EXPECT_EQ(quarantine.words, "SHOW QUARANTINE");
  EXPECT_EQ(quarantine.args, "");
  EXPECT_EQ(parse_console_command("start transaction").tag, "START TRANSACTION");
  EXPECT_EQ(parse_console_command("end").tag, "COMMIT");
  EXPECT_EQ(parse_console_command("abort").tag, "ROLLBACK");
  EXPECT_EQ(parse_console_command("SELECT 1").words, "SELECT");
  EXPECT_EQ(parse_console_command("SELECT 1").text, "SELECT 1");
  using Strings = std::vector<std::string>;
  EXPECT_EQ(predrop::proxy::console_words("public.t  AS \"x y\" IN db"), (Strings{"public.t", "AS", "\"x y\"", "IN", "db"}));
  EXPECT_EQ(predrop::proxy::console_words("\"a\"\"b\".t \"open"), (Strings{"\"a\"\"b\".t", "\"open\""}));
  EXPECT_EQ(predrop::proxy::console_words("  "), Strings{});
}

}  // namespace
}  // namespace dectest
