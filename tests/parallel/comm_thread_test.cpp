// tests/parallel/comm_thread_test.cpp: the communication thread runs jobs in posting order, drains,
// passes errors back, and shares its queue safely (this test also runs under ThreadSanitizer).
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "parallel/comm_thread.h"

namespace tbd {
namespace {

TEST(CommThread, RunsJobsInPostingOrder) {
  CommThread t;
  std::vector<int> order;  // written only by the comm thread, read after drain()
  for (int i = 0; i < 1000; ++i) t.post([&order, i] { order.push_back(i); });
  t.drain();
  ASSERT_EQ(order.size(), 1000u);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(order[i], i);
  int x = 0;
  t.run([&] { x = static_cast<int>(order.size()); });
  EXPECT_EQ(x, 1000);
}

TEST(CommThread, OverlapsTheCaller) {
  CommThread t;
  std::atomic<bool> release{false};
  std::atomic<int> done{0};
  t.post([&] {
    while (!release.load()) {
    }
    done = 1;
  });
  EXPECT_EQ(done.load(), 0);  // the caller goes on while the job waits
  release = true;
  t.drain();
  EXPECT_EQ(done.load(), 1);
}

TEST(CommThread, PassesTheFirstErrorBack) {
  CommThread t;
  t.post([] { throw std::runtime_error("first"); });
  t.post([] { throw std::runtime_error("second"); });
  try {
    t.drain();
    ADD_FAILURE() << "drain() did not rethrow";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "first");
  }
  t.drain();  // the error was handed over once
}

TEST(CommThread, DestructorRunsWhatWasPosted) {
  std::atomic<int> n{0};
  {
    CommThread t;
    for (int i = 0; i < 100; ++i) t.post([&] { ++n; });
  }
  EXPECT_EQ(n.load(), 100);
}

}  // namespace
}  // namespace tbd
