// tests/core/allocator_test.cpp: category accounting, peaks, limits and OOM messages.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "backends/backends.h"
#include "core/backend.h"
#include "core/error.h"

namespace tbd {
namespace {

TEST(TrackingAllocator, CountsCurrentAndPeakPerCategory) {
  auto be = make_cpu_backend();
  auto& a = be->allocator();
  const auto base = a.stats();
  {
    Tensor w = be->empty(Shape{10, 10}, MemCategory::kWeights);
    Tensor f = be->empty(Shape{256}, MemCategory::kFeatureMaps);
    EXPECT_EQ(a.stats().current_of(MemCategory::kWeights) - base.current_of(MemCategory::kWeights),
              400u);
    EXPECT_EQ(a.stats().current_of(MemCategory::kFeatureMaps) -
                  base.current_of(MemCategory::kFeatureMaps),
              1024u);
    EXPECT_EQ(a.stats().total_current - base.total_current, 1424u);
    EXPECT_EQ(a.stats().num_allocations - base.num_allocations, 2u);
  }
  EXPECT_EQ(a.stats().total_current, base.total_current);  // freed on last view
  EXPECT_GE(a.stats().total_peak, base.total_current + 1424u);
  a.reset_peak();
  EXPECT_EQ(a.stats().total_peak, a.stats().total_current);
}

TEST(TrackingAllocator, ViewsShareTheBuffer) {
  auto be = make_cpu_backend();
  Tensor t = be->empty(Shape{2, 3, 4}, MemCategory::kDynamic);
  auto before = be->allocator().stats().num_allocations;
  Tensor v = t.view(Shape{6, 4});
  EXPECT_EQ(v.raw(), t.raw());
  EXPECT_EQ(be->allocator().stats().num_allocations, before);
  EXPECT_THROW(t.view(Shape{5, 5}), Error);
}

// Several threads allocate and free at once (A3C's workers share one backend): every byte is
// accounted, nothing is lost or counted twice, and the peak covers what was live together.
// Under ThreadSanitizer (the tsan preset) this also proves the statistics race-free.
TEST(TrackingAllocator, ConcurrentThreadsKeepExactAccounting) {
  auto be = make_cpu_backend();
  auto& a = be->allocator();
  const MemoryStats base = a.stats();
  constexpr int kThreads = 4, kRounds = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        // A weight and a feature map live together for a moment, of a size per thread.
        Tensor w = be->empty(Shape{16 + t}, MemCategory::kWeights);
        Tensor f = be->empty(Shape{32 * (t + 1)}, MemCategory::kFeatureMaps);
        w.f32()[0] = static_cast<float>(r);  // the memory is this thread's
        f.f32()[0] = w.f32()[0];
        (void)a.stats();  // reads race with the other threads' writes unless guarded
      }
    });
  }
  for (auto& th : threads) th.join();
  const MemoryStats s = a.stats();
  EXPECT_EQ(s.total_current, base.total_current);
  EXPECT_EQ(s.current_of(MemCategory::kWeights), base.current_of(MemCategory::kWeights));
  EXPECT_EQ(s.current_of(MemCategory::kFeatureMaps), base.current_of(MemCategory::kFeatureMaps));
  EXPECT_EQ(s.num_allocations - base.num_allocations, 2u * kThreads * kRounds);
  // One thread's pair is the least that was ever live at once; all four pairs the most.
  std::size_t all = 0;
  for (int t = 0; t < kThreads; ++t) all += 4u * (16 + t) + 4u * 32 * (t + 1);
  EXPECT_GE(s.total_peak, base.total_current + 4u * 16 + 4u * 32);
  EXPECT_LE(s.total_peak, std::max(base.total_peak, base.total_current + all));
}

TEST(TrackingAllocator, LimitGivesOutOfMemoryWithSizes) {
  auto be = make_cpu_backend();
  be->allocator().set_limit_bytes(1 << 20);
  try {
    be->empty(Shape{1 << 20}, MemCategory::kFeatureMaps);  // 4 MiB > 1 MiB
    FAIL() << "expected OutOfMemory";
  } catch (const OutOfMemory& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("out of memory: needs"), std::string::npos) << m;
    EXPECT_NE(m.find("have 1.0 MiB"), std::string::npos) << m;
    EXPECT_NE(m.find("feature_maps"), std::string::npos) << m;
  }
  // A request just past the limit: the rounded sizes would read alike, so the bytes show.
  be->allocator().set_limit_bytes(std::size_t{1} << 31);
  const std::size_t in_use = be->allocator().stats().total_current;
  const int64_t floats = static_cast<int64_t>(((std::size_t{1} << 31) - in_use) / 4 + 16);
  try {
    be->empty(Shape{floats}, MemCategory::kWorkspace);
    FAIL() << "expected OutOfMemory";
  } catch (const OutOfMemory& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("have " + std::to_string(std::size_t{1} << 31) + " bytes"), std::string::npos)
        << m;
    EXPECT_NE(
        m.find("needs " + std::to_string(in_use + 4 * static_cast<std::size_t>(floats)) + " bytes"),
        std::string::npos)
        << m;
  }
}

// An element count past int64 is a named error, not a negative shape.
TEST(Shape, ElementCountOverflowIsAnError) {
  const Shape huge{int64_t{1} << 40, int64_t{1} << 30};
  try {
    (void)huge.numel();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("more elements than a 64-bit count holds"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ((Shape{int64_t{1} << 31, int64_t{1} << 31}.numel()), int64_t{1} << 62);
}

TEST(Backend, RejectsNonPositiveDimsAndBadBlockedShapes) {
  auto be = make_cpu_backend();
  EXPECT_THROW(be->empty(Shape{3, 0}, MemCategory::kDynamic), Error);
  EXPECT_THROW(be->empty(Shape{3, -2}, MemCategory::kDynamic), Error);
  EXPECT_THROW(be->empty(Shape{1, 15, 2, 2}, MemCategory::kDynamic, Layout::kNChw16c), Error);
}

TEST(Backend, BlockedRoundTripAndReorder) {
  auto be = make_cpu_backend();
  Shape s{2, 32, 3, 5};
  Tensor plain = be->empty(s, MemCategory::kDynamic);
  Tensor blocked = be->empty(s, MemCategory::kDynamic, Layout::kNChw16c);
  std::vector<float> h(s.numel()), back(s.numel()), back2(s.numel());
  for (std::size_t i = 0; i < h.size(); ++i) h[i] = static_cast<float>(i);
  be->copy_from_host(blocked, h.data());
  be->copy_to_host(back.data(), blocked);
  EXPECT_EQ(back, h);
  be->reorder(plain, blocked);
  be->copy_to_host(back2.data(), plain);
  EXPECT_EQ(back2, h);
  // The blocked buffer really is blocked: element (0, 1, 0, 0) sits at offset 1.
  EXPECT_EQ(blocked.f32()[1], h[1 * 3 * 5]);
}

TEST(Backend, CpuDescribesItself) {
  auto be = make_cpu_backend();
  auto d = be->describe();
  EXPECT_EQ(d.count("onednn_version"), 1u);
  EXPECT_GT(be->num_threads(), 0);
  EXPECT_FALSE(be->device_name().empty());
}

TEST(Backend, AutoFallsBackToCpuWithANotice) {
  std::string why;
  if (cuda_usable(&why)) GTEST_SKIP() << "a CUDA device is usable here";
  std::string notice;
  auto be = make_backend(BackendChoice::kAuto, &notice);
  EXPECT_EQ(be->kind(), DeviceKind::kCpu);
  EXPECT_NE(notice.find("CPU"), std::string::npos) << notice;
}

}  // namespace
}  // namespace tbd
