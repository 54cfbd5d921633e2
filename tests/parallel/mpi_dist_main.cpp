// tests/parallel/mpi_dist_main.cpp: the data-parallel tests, run by ctest under mpiexec at P = 1, 2
// and 4 ranks (tests/CMakeLists.txt: dist_mpi_np<P>, each with a timeout: a rank that stops
// early leaves the others waiting in a collective).
//
// Every rank runs every test; only rank 0 prints; the exit status is the worst over ranks.
// Collectives stay outside ASSERT_* (an early return on one rank would hang the rest).
//   - All-reduce: sums of rank-dependent values, bit-identical on every rank, odd sizes,
//     empty tensors, broadcast, the scalar reductions.
//   - Equivalence: P ranks at batch B, k SGD steps, against one process that runs the same
//     P shards of B as micro-batches, accumulates their gradients in rank order and averages
//     (P = 2: bit for bit, as PyTorch DDP; P = 4: within a stated tolerance, since MPI's
//     reduction tree is not the sequential sum); for every model with the default step, in
//     tiny configurations, with dropout (Transformer's layers and attention, Inception-v3's
//     classifier) and Faster R-CNN's samplers: their per-call draws are numbered by rank
//     (Layer::set_call_numbering) as the reference numbers its micro-batches.
//   - Bucket caps of 1 KiB, 25 MiB and unbounded give bit-identical weights.
//   - Ranks with different bucket plans get a named error before the first step.
//   - BatchNorm running statistics follow rank 0's (DDP's broadcast_buffers).
// `--abort-test` instead makes rank 1 abort (ctest checks that every rank ends with its
// message).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "backends/backends.h"
#include "layers/batchnorm2d.h"
#include "models/deepspeech2.h"
#include "models/faster_rcnn.h"
#include "models/gpt2.h"
#include "models/inception_v3.h"
#include "models/llama.h"
#include "models/resnet50.h"
#include "models/seq2seq.h"
#include "models/transformer.h"
#include "parallel/communicator.h"
#include "parallel/data_parallel.h"

namespace tbd {
namespace {

struct World {
  std::unique_ptr<Backend> be = make_cpu_backend();
  std::unique_ptr<Communicator> comm = make_communicator(DistBackend::kMpi, *be);
};

std::vector<float> host(Backend& be, const Tensor& t) {
  std::vector<float> v(static_cast<std::size_t>(t.numel()));
  be.copy_to_host(v.data(), t);
  return v;
}

// min == max over ranks of a hash of `v`: every rank holds the same bits.
bool same_on_every_rank(Communicator& c, const std::vector<float>& v) {
  uint64_t h = 1469598103934665603ull;
  for (float x : v) {
    uint32_t b;
    std::memcpy(&b, &x, 4);
    h = (h ^ b) * 1099511628211ull;
  }
  const double lo = static_cast<double>(h & 0xffffffffu), hi = static_cast<double>(h >> 32);
  return c.min(lo) == c.max(lo) && c.min(hi) == c.max(hi);
}

TEST(AllReduce, SumsOddSizesAndEmptyOnEveryRank) {
  World w;
  const int p = w.comm->size(), r = w.comm->rank();
  for (int64_t n : {0, 1, 3, 17, 1023, 100003}) {
    Tensor t = n ? w.be->empty(Shape{n}, MemCategory::kDynamic) : Tensor{};
    std::vector<float> v(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((r + 1) * (i % 7 + 1));
    if (n) {
      w.be->copy_from_host(t, v.data());
      w.comm->allreduce_sum(t);
      v = host(*w.be, t);
    }
    // Integers well below 2^24: every summation order gives the exact sum.
    const float ranks = static_cast<float>(p * (p + 1) / 2);
    int wrong = 0;
    for (int64_t i = 0; i < n; ++i) wrong += v[i] != ranks * static_cast<float>(i % 7 + 1);
    EXPECT_EQ(wrong, 0) << "n=" << n;
    EXPECT_TRUE(same_on_every_rank(*w.comm, v)) << "n=" << n;
  }
}

TEST(AllReduce, AsyncBucketsScaleAndKeepOrder) {
  World w;
  const int p = w.comm->size(), r = w.comm->rank();
  std::vector<Tensor> ts;
  for (int64_t n : {5, 0, 4099, 1}) {
    if (n == 0) {
      ts.emplace_back();
      continue;
    }
    Tensor t = w.be->empty(Shape{n}, MemCategory::kDynamic);
    std::vector<float> v(static_cast<std::size_t>(n), static_cast<float>(2 * (r + 1)));
    w.be->copy_from_host(t, v.data());
    ts.push_back(t);
  }
  for (std::size_t k = 0; k < ts.size(); ++k) {
    if (ts[k].defined()) w.comm->start_allreduce(static_cast<int>(k), ts[k], 1.f / p);
  }
  std::vector<CommEvent> ev = w.comm->wait_all();
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].bucket, 0);
  EXPECT_EQ(ev[1].bucket, 2);
  EXPECT_EQ(ev[2].bucket, 3);
  for (const CommEvent& e : ev) EXPECT_LE(e.start_s, e.end_s);
  const float mean = static_cast<float>(p + 1);  // 2 * (1 + .. + p) / p
  for (const Tensor& t : ts) {
    if (!t.defined()) continue;
    for (float x : host(*w.be, t)) ASSERT_FLOAT_EQ(x, mean);
  }
}

TEST(AllReduce, BroadcastAndScalars) {
  World w;
  const int p = w.comm->size(), r = w.comm->rank();
  Tensor t = w.be->empty(Shape{33}, MemCategory::kDynamic);
  std::vector<float> v(33, static_cast<float>(r + 10));
  w.be->copy_from_host(t, v.data());
  w.comm->broadcast(t, 0);
  for (float x : host(*w.be, t)) EXPECT_EQ(x, 10.f);
  EXPECT_EQ(w.comm->max(r), p - 1);
  EXPECT_EQ(w.comm->min(r), 0);
  EXPECT_EQ(w.comm->sum(1), p);
  w.comm->timed_allreduce(t);  // t = p x 10 everywhere
  for (float x : host(*w.be, t)) EXPECT_EQ(x, 10.f * p);
  std::vector<double> all = w.comm->allgather(r * 2.0);
  ASSERT_EQ(static_cast<int>(all.size()), p);
  for (int k = 0; k < p; ++k) EXPECT_EQ(all[k], 2.0 * k);
  w.comm->barrier();
}

#if TBD_HAVE_NCCL
// --tbd_dist=nccl's bootstrap over MPI, which needs no GPU: rank 0's ncclGetUniqueId reaches
// every rank.
TEST(NcclBootstrap, RankZerosIdReachesEveryRank) {
  World w;
  int rank = -1, size = 0;
  const std::string id = nccl_bootstrap_id(&rank, &size);
  EXPECT_EQ(rank, w.comm->rank());
  EXPECT_EQ(size, w.comm->size());
  ASSERT_EQ(id.size(), 128u);
  std::vector<float> bytes(id.begin(), id.end());
  EXPECT_TRUE(same_on_every_rank(*w.comm, bytes));
  EXPECT_NE(id, std::string(128, '\0'));
}
#endif

// ---- equivalence ----

struct TinyModel {
  const char* name;
  std::function<std::unique_ptr<Model>(Backend&, int64_t batch)> build;
  // False where the micro-batch reference cannot see what the ranks see (none now: dropout
  // masks and Faster R-CNN's samplers draw by call index, and rank r numbers its calls as the
  // reference's r-th micro-batch of each step is numbered).
  bool micro_batch_reference = true;
  // True where one batch of P*B is the same training as P shards of B up to rounding and its
  // inputs are the shards' concatenated along one axis: not with BatchNorm (its statistics are
  // per batch), nor with dropout (one batch's masks are not the shards'), nor with sampled
  // RoIs (Faster R-CNN draws per image and call).
  bool one_batch_reference = false;
  int64_t batch = 2;  // per rank
  // Inputs flattened from (T, N), time-major, by name, with their T: concatenated as (T, N).
  std::vector<std::pair<std::string, int64_t>> time_major_flat = {};
};

std::vector<TinyModel> tiny_models() {
  std::vector<TinyModel> out;
  out.push_back({"ResNet50", [](Backend& be, int64_t batch) {
                   ResNetOptions o;
                   o.batch = batch, o.image = 32, o.classes = 10, o.width_div = 16;
                   o.num_stages = 2, o.blocks_per_stage = 1, o.lr = 0.05, o.seed = 3;
                   return build_resnet50(be, o);
                 }});
  const auto transformer = [](double dropout) {
    return [dropout](Backend& be, int64_t batch) {
      TransformerOptions o;
      o.spec.layers = 1, o.spec.d_model = 16, o.spec.heads = 2, o.spec.ffn = 32;
      o.spec.vocab = 40, o.spec.src_len = o.spec.tgt_len = 6;
      o.spec.dropout = dropout;
      o.batch = batch, o.lr = 3e-3, o.seed = 5;
      return build_transformer(be, o);
    };
  };
  out.push_back({"Transformer", transformer(0), true, true});
  out.push_back({"TransformerDropout", transformer(0.3)});
  // Full-length sentences, so that the loss's mean over valid tokens of one batch of P*B is
  // the mean of the shards' means (with random lengths the shards' token counts differ).
  constexpr int64_t kSeq2SeqLen = 5;  // source and target steps; the labels are (T*N)
  out.push_back({"Seq2Seq",
                 [](Backend& be, int64_t batch) {
                   Seq2SeqOptions o;
                   o.spec.src_vocab = o.spec.tgt_vocab = 30;
                   o.spec.embed = o.spec.hidden = o.spec.attention = 8;
                   o.spec.src_len = o.spec.tgt_len = kSeq2SeqLen;
                   o.batch = batch, o.lr = 1e-2, o.seed = 7;
                   return build_seq2seq(be, o);
                 },
                 true,
                 true,
                 2,
                 {{"labels", kSeq2SeqLen}}});
  out.push_back({"DeepSpeech2", [](Backend& be, int64_t batch) {
                   DeepSpeech2Options o;
                   DeepSpeech2Spec& s = o.spec;
                   s.freq = 20, s.frames = 40, s.channels = 4;
                   s.k1_time = 5, s.k1_freq = 5, s.s1_time = 2, s.s1_freq = 2;
                   s.k2_time = 5, s.k2_freq = 3, s.s2_time = 1, s.s2_freq = 2;
                   s.rnn_layers = 1, s.hidden = 8, s.label_len = 4;
                   o.batch = batch, o.lr = 2e-2, o.seed = 11;
                   return build_deepspeech2(be, o);
                 }});
  out.push_back({"InceptionV3", [](Backend& be, int64_t batch) {
                   InceptionV3Options o;
                   o.batch = batch, o.image = 75, o.classes = 10, o.aux = false;
                   o.width_div = 16, o.dropout = 0.5, o.lr = 0.05, o.seed = 11;
                   return build_inception_v3(be, o);
                 }});
  out.push_back({"FasterRCNN",
                 [](Backend& be, int64_t batch) -> std::unique_ptr<Model> {
                   FasterRcnnOptions o = faster_rcnn_tiny();
                   o.batch = batch;
                   return build_faster_rcnn(be, o);
                 },
                 true, false, 1});
  // Tokens, positions and labels are batch-major: one batch of P*B is the shards' concatenated.
  out.push_back({"GPT2",
                 [](Backend& be, int64_t batch) {
                   Gpt2Options o = gpt2_tiny();
                   o.spec.layers = 1, o.spec.channels = 16, o.spec.heads = 2;
                   o.spec.vocab = 40, o.spec.vocab_pad = 48, o.seq_len = 6;
                   o.batch = batch;
                   return build_gpt2(be, o);
                 },
                 true, true});
  out.push_back({"Llama",
                 [](Backend& be, int64_t batch) {
                   LlamaOptions o = llama_tiny();
                   o.spec.layers = 1, o.spec.channels = 16, o.spec.heads = 4, o.spec.kv_heads = 2;
                   o.spec.hidden = 24, o.spec.vocab = 40, o.seq_len = 6;
                   o.batch = batch;
                   return build_llama(be, o);
                 },
                 true, true});
  return out;
}

std::unique_ptr<Model> build_in_backward_order(const TinyModel& t, Backend& be, int shard) {
  ParamOrderScope order(ParamOrder::kBackward);
  std::unique_ptr<Model> m = t.build(be, t.batch);
  m->set_data_shard(shard);
  return m;
}

struct Trained {
  std::vector<float> weights, grads;
  float first_loss = 0;  // this rank's, on its shard
};

Trained train_data_parallel(const TinyModel& t, World& w, DistOptions opt, int steps) {
  std::unique_ptr<Model> m = build_in_backward_order(t, *w.be, w.comm->rank());
  DataParallel dp(*m, *w.comm, opt);
  float first_loss = 0;
  for (int s = 0; s < steps; ++s) {
    dp.train_step();
    if (s == 0) first_loss = m->loss();
  }
  return {host(*w.be, m->graph().arena().values), host(*w.be, m->graph().arena().grads),
          first_loss};
}

// One process, the P shards as micro-batches; their gradients summed as a pairwise tree
// ((g0 + g1) + (g2 + g3)), the order of Open MPI's recursive doubling (and of any order for
// P <= 2), then times 1/P.
Trained train_micro_batches(const TinyModel& t, Backend& be, int p, int steps) {
  std::unique_ptr<Model> m = build_in_backward_order(t, be, 0);
  Graph& g = m->graph();
  const float scale = 1.f / static_cast<float>(p);
  std::vector<float> acc;
  for (int s = 0; s < steps; ++s) {
    std::vector<std::vector<float>> shard(static_cast<std::size_t>(p));
    for (int r = 0; r < p; ++r) {
      m->set_data_shard(r);
      g.zero_grad();
      g.forward();
      g.backward();
      shard[r] = host(be, g.arena().grads);
    }
    for (int stride = 1; stride < p; stride *= 2) {
      for (int r = 0; r + stride < p; r += 2 * stride) {
        for (std::size_t i = 0; i < shard[r].size(); ++i) shard[r][i] += shard[r + stride][i];
      }
    }
    acc = std::move(shard[0]);
    if (p > 1) {
      for (float& x : acc) x *= scale;
    }
    be.copy_from_host(g.arena().grads, acc.data());
    m->optimizer().step();
  }
  return {host(be, g.arena().values), host(be, g.arena().grads)};
}

// Whether P ranks' sums have known bits: beyond two ranks they depend on the library's
// reduction tree, which it may pick by message size; ctest pins Open MPI's recursive doubling
// (the reference's pairwise tree) for P = 4. Otherwise the tests use a tolerance.
bool bitwise_at(int p) {
  const char* algo = std::getenv("OMPI_MCA_coll_tuned_allreduce_algorithm");
  return p <= 2 || ((p & (p - 1)) == 0 && algo && std::string(algo) == "3");
}

// Frozen parameters (no bucket) keep zero gradients on both sides, so arenas compare whole.
void expect_match(const std::vector<float>& got, const std::vector<float>& want, bool bitwise,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  if (bitwise) {
    std::size_t diff = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
      diff += std::memcmp(&got[i], &want[i], sizeof(float)) != 0;
    EXPECT_EQ(diff, 0u) << what << ": " << diff << " of " << got.size() << " elements differ";
    return;
  }
  // Different summation trees of 4 terms, then k SGD steps: relative 1e-4 of the largest value.
  float maxabs = 0;
  for (float x : want) maxabs = std::max(maxabs, std::fabs(x));
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, static_cast<double>(std::fabs(got[i] - want[i])));
  EXPECT_LE(worst, 1e-4 * maxabs + 1e-7) << what << ": max |diff| " << worst;
}

// Data-parallel training equals the P shards run as micro-batches in one process, summed as the
// all-reduce sums them.
void expect_data_parallel_equals_micro_batches(World& w) {
  const int p = w.comm->size();
  const int steps = 3;
  const bool bitwise = bitwise_at(p);
  for (const TinyModel& t : tiny_models()) {
    if (!t.micro_batch_reference) continue;
    Trained dp = train_data_parallel(t, w, DistOptions{}, steps);
    EXPECT_TRUE(same_on_every_rank(*w.comm, dp.weights)) << t.name;
    // The ranks trained on different shards (else averaging would be the identity).
    if (p > 1) {
      EXPECT_NE(w.comm->min(dp.first_loss), w.comm->max(dp.first_loss)) << t.name;
    }
    Trained ref = train_micro_batches(t, *w.be, p, steps);
    expect_match(dp.grads, ref.grads, bitwise, std::string(t.name) + " gradients");
    expect_match(dp.weights, ref.weights, bitwise, std::string(t.name) + " weights");
  }
}

TEST(DataParallel, EqualsAccumulatedMicroBatches) {
  World w;
  expect_data_parallel_equals_micro_batches(w);
}

// The same under --tbd_math=bf16: bf16 activations, f32 master weights and gradients, so the
// all-reduce (f32) and the reference agree as in fp32.
TEST(DataParallel, EqualsAccumulatedMicroBatchesInBf16) {
  World w;
  try {
    w.be->set_math_mode(MathMode::kBf16);
  } catch (const std::exception& e) {
    GTEST_SKIP() << "no bf16 on this CPU: " << e.what();
  }
  expect_data_parallel_equals_micro_batches(w);
}

// The P shards' inputs, concatenated along the axis that holds the batch, into a model built
// for P*B (batch-major and time-major inputs alike).
void load_concatenated_shards(const TinyModel& t, Backend& be, int p, Model& big) {
  std::vector<std::unique_ptr<Model>> shards;
  for (int r = 0; r < p; ++r) shards.push_back(build_in_backward_order(t, be, r));
  Graph& bg = big.graph();
  for (TensorId id : big.data_input_ids()) {
    const std::string& name = bg.tensor_name(id);
    Shape bs = bg.desc(id).shape;
    Graph& sg = shards[0]->graph();
    TensorId sid = -1;
    for (TensorId s : shards[0]->data_input_ids())
      if (sg.tensor_name(s) == name) sid = s;
    ASSERT_GE(sid, 0) << name;
    Shape ss = sg.desc(sid).shape;
    for (const auto& [flat, steps] : t.time_major_flat) {
      if (flat != name) continue;
      ASSERT_EQ(ss.rank(), 1) << name;
      ss = Shape{steps, ss[0] / steps};
      bs = Shape{steps, bs[0] / steps};
    }
    ASSERT_EQ(bs.rank(), ss.rank()) << name;
    int axis = -1;
    for (int d = 0; d < bs.rank() && axis < 0; ++d)
      if (bs[d] == p * ss[d] && ss[d] > 0) axis = d;
    ASSERT_GE(axis, 0) << name << ": no batch axis";
    const std::size_t elem = bg.desc(id).bytes() / static_cast<std::size_t>(bs.numel());
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; ++d) outer *= ss[d];
    for (int d = axis + 1; d < ss.rank(); ++d) inner *= ss[d];
    const std::size_t block = static_cast<std::size_t>(ss[axis] * inner) * elem;
    std::vector<char> out(bg.desc(id).bytes());
    for (int r = 0; r < p; ++r) {
      std::vector<char> in(sg.desc(sid).bytes());
      be.copy_to_host(in.data(), shards[r]->graph().tensor(sid));
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(out.data() + (o * p + r) * block, in.data() + o * block, block);
    }
    be.copy_from_host(bg.tensor(id), out.data());
  }
}

// Against one batch of P*B (the Transformer, Seq2Seq): the same gradients up to rounding, the
// batch's sums running in another order. Tolerance: within 1e-5 of the largest gradient, after one
// step. (Not the weights after k steps: Adam scales each update to about lr whatever the
// gradient's size, so a rounding difference in a near-zero gradient moves a weight by up to lr.)
TEST(DataParallel, MatchesOneBatchOfAllShardsWithinTolerance) {
  World w;
  const int p = w.comm->size();
  for (const TinyModel& t : tiny_models()) {
    if (!t.one_batch_reference) continue;
    Trained dp = train_data_parallel(t, w, DistOptions{}, 1);
    std::unique_ptr<Model> big;
    {
      ParamOrderScope order(ParamOrder::kBackward);
      big = t.build(*w.be, p * t.batch);
    }
    load_concatenated_shards(t, *w.be, p, *big);
    big->train_step();
    const std::vector<float> want = host(*w.be, big->graph().arena().grads);
    ASSERT_EQ(dp.grads.size(), want.size()) << t.name;
    float maxabs = 0;
    double worst = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      maxabs = std::max(maxabs, std::fabs(want[i]));
      worst = std::max(worst, static_cast<double>(std::fabs(dp.grads[i] - want[i])));
    }
    EXPECT_GT(maxabs, 0) << t.name;
    EXPECT_LE(worst, 1e-5 * maxabs) << t.name << " gradients: max |diff| " << worst;
  }
}

TEST(DataParallel, BucketCapsDoNotChangeTheResult) {
  World w;
  for (const TinyModel& t : tiny_models()) {
    std::vector<Trained> runs;
    std::vector<std::size_t> counts;
    for (double cap : {1.0 / 1024, 25.0, 0.0}) {
      DistOptions opt;
      opt.bucket_mib = cap;
      opt.first_bucket_mib = cap;
      runs.push_back(train_data_parallel(t, w, opt, 2));
      std::unique_ptr<Model> m = build_in_backward_order(t, *w.be, w.comm->rank());
      counts.push_back(plan_buckets(m->graph(), opt).buckets.size());
    }
    EXPECT_GT(counts[0], counts[1]) << t.name;  // 1 KiB cuts a tiny model into many buckets
    EXPECT_EQ(counts[2], 1u) << t.name;
    const bool bitwise = bitwise_at(w.comm->size());
    for (std::size_t k = 1; k < runs.size(); ++k)
      expect_match(runs[k].weights, runs[0].weights, bitwise,
                   std::string(t.name) + " cap " + std::to_string(k));
  }
}

// Every BatchNorm's running statistics that training updates, in graph order.
std::vector<float> running_stats(Backend& be, Model& m, int64_t* layers = nullptr) {
  std::vector<float> out;
  int64_t n = 0;
  for (const Graph::Node& node : m.graph().nodes()) {
    const auto* bn = dynamic_cast<const BatchNormLayer*>(node.layer.get());
    if (bn == nullptr || bn->frozen()) continue;
    ++n;
    for (const Tensor* t : {&bn->running_mean(), &bn->running_var()}) {
      const std::vector<float> v = host(be, *t);
      out.insert(out.end(), v.begin(), v.end());
    }
  }
  if (layers) *layers = n;
  return out;
}

// DDP's broadcast_buffers: the plan counts every trained BatchNorm's statistics (none of Faster
// R-CNN's frozen ones); rank 0's statistics are the source, so they and every weight are the
// same bits with and without it; on the other ranks the step starts from rank 0's statistics
// (they end differently from a run without it), and sync_buffers makes all ranks rank 0's.
TEST(DataParallel, BatchNormBuffersFollowRankZero) {
  World w;
  const int p = w.comm->size();
  int with_buffers = 0;
  for (const TinyModel& t : tiny_models()) {
    std::vector<float> stats[2], weights[2];
    for (bool on : {true, false}) {
      std::unique_ptr<Model> m = build_in_backward_order(t, *w.be, w.comm->rank());
      DistOptions opt;
      opt.broadcast_buffers = on;
      DataParallel dp(*m, *w.comm, opt);
      int64_t layers = 0;
      const std::vector<float> initial = running_stats(*w.be, *m, &layers);
      EXPECT_EQ(dp.plan().buffer_tensors, on ? 2 * layers : 0) << t.name;
      EXPECT_EQ(dp.plan().buffer_numel, on ? static_cast<int64_t>(initial.size()) : 0) << t.name;
      if (initial.empty()) break;
      for (int s = 0; s < 2; ++s) dp.train_step();
      stats[on] = running_stats(*w.be, *m);
      weights[on] = host(*w.be, m->graph().arena().values);
      if (p > 1 && !on) {
        EXPECT_FALSE(same_on_every_rank(*w.comm, stats[on])) << t.name << ": shards alike";
      }
      if (on) {
        dp.sync_buffers();
        EXPECT_TRUE(same_on_every_rank(*w.comm, running_stats(*w.be, *m))) << t.name;
        if (w.comm->rank() == 0) {
          EXPECT_EQ(running_stats(*w.be, *m), stats[on]) << t.name;
        }
      }
    }
    if (stats[0].empty()) continue;
    ++with_buffers;
    EXPECT_EQ(weights[0], weights[1]) << t.name;
    if (w.comm->rank() == 0 || p == 1) {
      EXPECT_EQ(stats[0], stats[1]) << t.name;
    } else {
      EXPECT_NE(stats[0], stats[1]) << t.name;
    }
  }
  EXPECT_EQ(with_buffers, 3);  // ResNet-50, DeepSpeech2, Inception-v3
}

TEST(DataParallel, DifferentBucketPlansAreANamedError) {
  World w;
  if (w.comm->size() < 2) GTEST_SKIP() << "needs two ranks";
  const TinyModel t = tiny_models()[0];
  std::unique_ptr<Model> m = build_in_backward_order(t, *w.be, w.comm->rank());
  DistOptions opt;
  opt.bucket_mib = w.comm->rank() == 0 ? 25 : 1.0 / 1024;
  opt.first_bucket_mib = opt.bucket_mib;
  std::string what;
  try {
    DataParallel dp(*m, *w.comm, opt);
  } catch (const Error& e) {
    what = e.what();
  }
  EXPECT_NE(what.find("bucket plans differ"), std::string::npos) << what;
}

TEST(DataParallel, PlanFollowsBackwardAndCoversEveryTrainedGradient) {
  World w;
  for (const TinyModel& t : tiny_models()) {
    std::unique_ptr<Model> m = build_in_backward_order(t, *w.be, w.comm->rank());
    DistOptions opt;
    opt.bucket_mib = 1.0 / 64;
    opt.first_bucket_mib = 1.0 / 256;
    BucketPlan plan = plan_buckets(m->graph(), opt);
    ASSERT_FALSE(plan.buckets.empty()) << t.name;
    int64_t trained = 0;
    for (Param* prm : m->graph().params())
      trained += m->graph().grad_ready_node(prm) >= 0 ? prm->grad.stored_numel() : 0;
    EXPECT_EQ(plan.grad_numel, trained) << t.name;
    EXPECT_EQ(plan.buckets[0].offset, 0) << t.name;
    for (std::size_t k = 1; k < plan.buckets.size(); ++k) {
      const Bucket& a = plan.buckets[k - 1];
      const Bucket& b = plan.buckets[k];
      EXPECT_EQ(b.offset, a.offset + a.numel) << t.name << " bucket " << k;
      EXPECT_LE(b.ready_node, a.ready_node) << t.name << " bucket " << k;
    }
  }
}

}  // namespace
}  // namespace tbd

int main(int argc, char** argv) {
  tbd::dist_init(&argc, &argv);
  const int rank = tbd::launch_rank();
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--abort-test") {
      auto be = tbd::make_cpu_backend();
      auto comm = tbd::make_communicator(tbd::DistBackend::kMpi, *be);
      if (comm->rank() == 1) comm->abort("test failure on purpose");
      comm->barrier();  // the other ranks wait here until the abort ends them
      return 3;         // a single rank has nobody to abort it
    }
  }
  ::testing::InitGoogleTest(&argc, argv);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int rc = RUN_ALL_TESTS();
  int worst = rc;
  {
    auto be = tbd::make_cpu_backend();
    auto comm = tbd::make_communicator(tbd::DistBackend::kMpi, *be);
    worst = static_cast<int>(comm->max(rc));
  }
  return worst;
}
