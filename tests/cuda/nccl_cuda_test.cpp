// tests/cuda/nccl_cuda_test.cpp: the NCCL communicator on a GPU (skipped, with the reason,
// where no CUDA device is usable): one rank's data-parallel step equals the default step bit for
// bit (ncclAvg over one rank is the identity), and an all-reduce sweep of odd sizes keeps its
// values. Multi-rank NCCL needs one GPU per rank; the lent box has one. Also the data-parallel
// profile's device-side ready times (CUDA events), which need no NCCL.
#include <gtest/gtest.h>

#include <cstring>

#include "backends/backends.h"
#include "models/resnet50.h"
#include "parallel/data_parallel.h"
#include "tests/parallel/ready_times.h"
#include "tests/support/check.h"

namespace tbd {
namespace {

ResNetOptions tiny_resnet() {
  ResNetOptions o;
  o.batch = 2, o.image = 32, o.classes = 10, o.width_div = 16;
  o.num_stages = 2, o.blocks_per_stage = 1, o.lr = 0.05, o.seed = 3;
  return o;
}

std::vector<float> host(Backend& be, const Tensor& t) {
  std::vector<float> v(static_cast<std::size_t>(t.numel()));
  be.synchronize();
  be.copy_to_host(v.data(), t);
  return v;
}

TEST(NcclCuda, OneRankStepEqualsTheDefaultStep) {
  TBD_SKIP_WITHOUT_CUDA();
  if (!dist_backend_built(DistBackend::kNccl)) GTEST_SKIP() << "built without NCCL";
  auto be = make_backend(BackendChoice::kCuda);
  std::unique_ptr<Model> plain, dist;
  {
    ParamOrderScope order(ParamOrder::kBackward);
    plain = build_resnet50(*be, tiny_resnet());
    dist = build_resnet50(*be, tiny_resnet());
  }
  auto comm = make_communicator(DistBackend::kNccl, *be);
  ASSERT_EQ(comm->size(), 1);
  DataParallel dp(*dist, *comm, DistOptions{});
  for (int s = 0; s < 3; ++s) {
    plain->train_step();
    dp.train_step();
    EXPECT_EQ(plain->loss(), dist->loss()) << "step " << s;
  }
  std::vector<float> a = host(*be, plain->graph().arena().values);
  std::vector<float> b = host(*be, dist->graph().arena().values);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
  EXPECT_EQ(dp.last_times().events.size(), dp.plan().buckets.size());
}

// On a device the profile's ready times are events after each node's queued backward work
// (Backend::mark): after forward, before backward ended (host and device clocks agree to
// within the tolerance), in the arena's order; the scaling model reads them.
TEST(DataParallelCuda, ProfileHasDeviceReadyTimes) {
  TBD_SKIP_WITHOUT_CUDA();
  auto be = make_backend(BackendChoice::kCuda);
  std::unique_ptr<Model> m;
  {
    ParamOrderScope order(ParamOrder::kBackward);
    m = build_resnet50(*be, tiny_resnet());
  }
  auto comm = make_local_communicator(*be);
  DataParallel dp(*m, *comm, DistOptions{});
  for (int s = 0; s < 3; ++s) dp.train_step();
  const DistProfile p = dp.profile();
  EXPECT_GT(test::expect_ready_times_in_backward(dp, 1e-4 + 0.05 * (p.forward + p.backward)), 0.0);
}

TEST(NcclCuda, AllReduceKeepsValuesOnOneRank) {
  TBD_SKIP_WITHOUT_CUDA();
  if (!dist_backend_built(DistBackend::kNccl)) GTEST_SKIP() << "built without NCCL";
  auto be = make_backend(BackendChoice::kCuda);
  auto comm = make_communicator(DistBackend::kNccl, *be);
  for (int64_t n : {1, 3, 1023, 100003}) {
    Tensor t = be->empty(Shape{n}, MemCategory::kDynamic);
    std::vector<float> v(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 7 + 1);
    be->copy_from_host(t, v.data());
    comm->allreduce_sum(t);
    EXPECT_GE(comm->timed_allreduce(t), 0.0);
    comm->start_allreduce(0, t, 1.f);
    EXPECT_EQ(comm->wait_all().size(), 1u);
    EXPECT_EQ(host(*be, t), v) << "n=" << n;
  }
  EXPECT_EQ(comm->max(3.0), 3.0);
  EXPECT_EQ(comm->allgather(2.0), std::vector<double>{2.0});
}

}  // namespace
}  // namespace tbd
