// new_uuid hands out a thread's block of random bytes 16 at a time: every UUID is a well-formed
// version 4, none repeats within or across threads, and a forked child never hands out the bytes
// its parent had drawn but not used.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <regex>
#include <set>
#include <thread>

#include "capture/store_writer.hpp"

using predrop::capture::new_uuid;

TEST(NewUuid, VersionFourTextForm) {
  const std::regex form("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}");
  for (int i = 0; i < 300; ++i) {  // past several blocks
    const std::string id = new_uuid();
    ASSERT_TRUE(std::regex_match(id, form)) << id;
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
