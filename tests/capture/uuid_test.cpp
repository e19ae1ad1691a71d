// new_uuid hands out a thread's block of random bytes 16 at a time behind the time: every UUID is a
// well-formed version 7 whose first 48 bits are the Unix milliseconds it was made in (so the store's
// B-tree keys grow with time) and whose next 12 a count within it (ids sort in the order made), none
// repeats within or across threads, and a forked child never hands out the bytes its parent had
// drawn but not used.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <regex>
#include <set>
#include <thread>

#include "capture/store_writer.hpp"

using predrop::capture::new_uuid;

namespace {

uint64_t unix_ms() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
}

// The 48-bit time field of a UUID's text form: its first 12 hex digits.
uint64_t time_field(const std::string& id) { return std::stoull(id.substr(0, 8) + id.substr(9, 4), nullptr, 16); }

}  // namespace

TEST(NewUuid, VersionSevenTextFormWithTheTimeFirst) {
  const std::regex form("[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}");
  for (int i = 0; i < 300; ++i) {  // past several blocks
    const uint64_t before = unix_ms();
    const std::string id = new_uuid();
    const uint64_t after = unix_ms();
    ASSERT_TRUE(std::regex_match(id, form)) << id;
    ASSERT_GE(time_field(id), before) << id;
    ASSERT_LE(time_field(id), after) << id;
  }
}

// Ids made milliseconds apart sort, as text and as PostgreSQL's uuid (bytewise), in the order made.
TEST(NewUuid, LaterIdsSortAfterEarlierOnes) {
  std::string last = new_uuid();
  for (int i = 0; i < 5; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const std::string next = new_uuid();
    EXPECT_LT(last, next);
    last = next;
  }
}

// Within one millisecond too: an outcome check tells the later of two DROPs of one table by its
// event id (quarantine/store_rows.hpp), and two holds can be made in one millisecond.
TEST(NewUuid, IdsMadeWithinAMillisecondSortInTheOrderMade) {
  std::string last = new_uuid();
  for (int i = 0; i < 20000; ++i) {
    const std::string next = new_uuid();
    ASSERT_LT(last, next) << "id " << i;
    last = next;
  }
}

TEST(NewUuid, NoneRepeatsAcrossBlocksAndThreads) {
  std::vector<std::string> a, b;
  std::thread ta([&] { for (int i = 0; i < 5000; ++i) a.push_back(new_uuid()); });
  std::thread tb([&] { for (int i = 0; i < 5000; ++i) b.push_back(new_uuid()); });
  ta.join();
  tb.join();
  std::set<std::string> all(a.begin(), a.end());
  all.insert(b.begin(), b.end());
  EXPECT_EQ(all.size(), 10000u);
}

TEST(NewUuid, AForkedChildDrawsItsOwnBytes) {
  (void)new_uuid();  // this thread now has a block with unused bytes
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const std::string id = new_uuid();
    const ssize_t wrote = write(pipe_fds[1], id.data(), id.size());
    _exit(wrote == static_cast<ssize_t>(id.size()) ? 0 : 1);
  }
  close(pipe_fds[1]);
  const std::string parent_next = new_uuid();
  char buf[64] = {};
  const ssize_t got = read(pipe_fds[0], buf, sizeof buf);
  close(pipe_fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_EQ(got, 36);
  EXPECT_NE(std::string(buf, 36), parent_next) << "the child handed out its parent's next UUID";
}
