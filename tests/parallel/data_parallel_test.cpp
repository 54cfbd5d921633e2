// tests/parallel/data_parallel_test.cpp: the data-parallel step without a library (the group of
// one): the backward-order arena, the bucket plan, the hook, and that one rank trains exactly
// as the non-distributed step does.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "backends/backends.h"
#include "models/resnet50.h"
#include "models/transformer.h"
#include "parallel/data_parallel.h"
#include "tests/parallel/ready_times.h"

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
  be.copy_to_host(v.data(), t);
  return v;
}

TEST(DataParallel, OneRankEqualsTheDefaultStepBitForBit) {
  auto be = make_cpu_backend();
  std::unique_ptr<Model> plain, dist;
  {
    ParamOrderScope order(ParamOrder::kBackward);
    plain = build_resnet50(*be, tiny_resnet());
    dist = build_resnet50(*be, tiny_resnet());
  }
  auto comm = make_local_communicator(*be);
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
  const DistStepTimes& t = dp.last_times();
  EXPECT_EQ(t.events.size(), dp.plan().buckets.size());
  EXPECT_GT(t.step, 0);
  EXPECT_EQ(dp.wire_bytes_per_rank(), 0);  // one rank sends nothing
}

// The profile says when backward completed each gradient (Backend::mark, the host clock here):
// after forward, before backward ended, and in the arena's order, the order of completion.
TEST(DataParallel, ProfileHasEveryGradientsReadyTime) {
  auto be = make_cpu_backend();
  std::unique_ptr<Model> m;
  {
    ParamOrderScope order(ParamOrder::kBackward);
    m = build_resnet50(*be, tiny_resnet());
  }
  auto comm = make_local_communicator(*be);
  DataParallel dp(*m, *comm, DistOptions{});
  for (int s = 0; s < 2; ++s) dp.train_step();
  ASSERT_EQ(dp.profile().steps, 2);
  // The marks' clock starts just after the step's.
  EXPECT_GT(test::expect_ready_times_in_backward(dp, 1e-6), 0.0);
  // A slot not marked since the timeline's start reads -1.
  be->mark_start();
  EXPECT_EQ(be->marked_s(0), -1.0);
  be->mark(5);
  EXPECT_GE(be->marked_s(5), 0.0);
  EXPECT_EQ(be->marked_s(4), -1.0);
  EXPECT_EQ(be->marked_s(1000), -1.0);
}

TEST(DataParallel, BackwardOrderArenaTrainsAsTheAlignedOne) {
  // The arena layout moves parameters, not arithmetic: the same losses either way.
  auto be = make_cpu_backend();
  std::unique_ptr<Model> aligned = build_resnet50(*be, tiny_resnet());
  std::unique_ptr<Model> backward;
  {
    ParamOrderScope order(ParamOrder::kBackward);
    backward = build_resnet50(*be, tiny_resnet());
  }
  EXPECT_EQ(aligned->graph().param_order(), ParamOrder::kAligned);
  EXPECT_EQ(backward->graph().param_order(), ParamOrder::kBackward);
  for (int s = 0; s < 3; ++s) {
    aligned->train_step();
    backward->train_step();
    EXPECT_EQ(aligned->loss(), backward->loss()) << "step " << s;
  }
}

TEST(DataParallel, FirstBucketIsSmallAndHoldsTheLastLayer) {
  auto be = make_cpu_backend();
  TransformerOptions o;
  o.spec.layers = 1, o.spec.d_model = 32, o.spec.heads = 2, o.spec.ffn = 64;
  o.spec.vocab = 4000, o.spec.src_len = o.spec.tgt_len = 4;
  o.batch = 1;
  std::unique_ptr<Model> m;
  {
    ParamOrderScope order(ParamOrder::kBackward);
    m = build_transformer(*be, o);
  }
  DistOptions opt;
  opt.bucket_mib = 0.25;
  opt.first_bucket_mib = 1.0 / 64;
  BucketPlan plan = plan_buckets(m->graph(), opt);
  ASSERT_GE(plan.buckets.size(), 2u);
  // DDP's rule: a bucket closes once it reaches its cap (checked after adding a gradient).
  for (std::size_t k = 0; k + 1 < plan.buckets.size(); ++k) {
    const double cap = (k == 0 ? opt.first_bucket_mib : opt.bucket_mib) * (1 << 20);
    EXPECT_GE(plan.buckets[k].bytes(), cap) << "bucket " << k;
  }
  // The last node with parameters completes first: its gradients open bucket 0.
  int last = -1;
  for (std::size_t i = 0; i < m->graph().nodes().size(); ++i)
    if (!m->graph().nodes()[i].layer->params().empty()) last = static_cast<int>(i);
  EXPECT_EQ(plan.buckets[0].ready_node <= last, true);
  EXPECT_NE(plan.describe().find(std::to_string(plan.buckets.size()) + " buckets"),
            std::string::npos);
}

TEST(DataParallel, ModelsWithTheirOwnStepAreANamedError) {
  auto be = make_cpu_backend();
  Model m(*be, "TwoOptimizers");
  TensorId x = m.data_input("x", Shape{1, 2}, DType::kF32, 0, 1);
  (void)x;
  m.add_graph();
  try {
    check_data_parallel_model(m);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("TwoOptimizers cannot run data-parallel"),
              std::string::npos)
        << e.what();
  }
}

TEST(DataParallel, ArenaInAlignedOrderIsANamedError) {
  auto be = make_cpu_backend();
  std::unique_ptr<Model> m = build_resnet50(*be, tiny_resnet());
  try {
    plan_buckets(m->graph(), DistOptions{});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ParamOrderScope"), std::string::npos) << e.what();
  }
}

#if TBD_HAVE_NCCL
// Without MPI, --tbd_dist=nccl takes its place from the environment and NCCL_COMM_ID names
// rank 0's bootstrap address; no GPU is needed to get that far.
// The local rank (which GPU an NCCL rank takes) from the launchers' variables, Open MPI's first.
TEST(LaunchLocalRank, FromTheEnvironment) {
  const char* vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "TBD_LOCAL_RANK",
                        "LOCAL_RANK"};
  std::vector<std::pair<std::string, std::string>> saved;
  for (const char* v : vars) {
    if (const char* s = std::getenv(v)) saved.emplace_back(v, s);
    unsetenv(v);
  }
  EXPECT_EQ(launch_local_rank(), 0);
  setenv("LOCAL_RANK", "3", 1);
  EXPECT_EQ(launch_local_rank(), 3);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
  EXPECT_EQ(launch_local_rank(), 1);
  for (const char* v : vars) unsetenv(v);
  for (const auto& [k, s] : saved) setenv(k.c_str(), s.c_str(), 1);
}

TEST(NcclBootstrap, FromTheEnvironment) {
  setenv("TBD_RANK", "1", 1);
  setenv("TBD_WORLD_SIZE", "2", 1);
  unsetenv("NCCL_COMM_ID");
  int rank = -1, size = 0;
  try {
    nccl_bootstrap_id(&rank, &size);
    ADD_FAILURE() << "no error without NCCL_COMM_ID";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("NCCL_COMM_ID"), std::string::npos) << e.what();
  }
  setenv("NCCL_COMM_ID", "127.0.0.1:29517", 1);
  const std::string a = nccl_bootstrap_id(&rank, &size);
  const std::string b = nccl_bootstrap_id(&rank, &size);
  EXPECT_EQ(rank, 1);
  EXPECT_EQ(size, 2);
  EXPECT_EQ(a, b);  // every rank reads the same address: the same id
  unsetenv("NCCL_COMM_ID");
  unsetenv("TBD_RANK");
  unsetenv("TBD_WORLD_SIZE");
}
#endif

}  // namespace
}  // namespace tbd
