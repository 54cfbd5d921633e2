// tests/models/llama_test.cpp: the Llama-3-style decoder. The tiny configuration overfits one
// batch and reruns identically; attention is causal through the whole model (RoPE, grouped-query
// heads); the parameter count formula holds for Llama 3.2 1B's shape (untied and tied: Meta's
// published 1,235,814,400) and equals the built models'; weight decay skips the norms; the model
// FLOPs follow the documented formula; bad sizes are refused by name.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/backends.h"
#include "core/error.h"
#include "models/llama.h"
#include "tests/models/causal.h"
#include "tests/models/overfit.h"
#include "tests/support/check.h"

namespace tbd {
namespace {

using test::from_host;
using test::to_host;

TEST(Llama, TinyConfigurationOverfitsAndReruns) {
  auto be = make_cpu_backend();
  auto a = losses(*build_llama(*be, llama_tiny()), 60);
  expect_overfits(a);
  auto b = losses(*build_llama(*be, llama_tiny()), 60);
  EXPECT_EQ(a, b);
}

TEST(Llama, TiedTinyConfigurationOverfits) {
  auto be = make_cpu_backend();
  LlamaOptions o = llama_tiny();
  o.spec.tied = true;
  expect_overfits(losses(*build_llama(*be, o), 60));
}

// The logits at positions before t do not move when the tokens from t on change (RoPE and
// grouped-query heads included); those at t and after do.
TEST(Llama, AttentionIsCausalThroughTheModel) {
  auto be = make_cpu_backend();
  const bool planned = memory_planning_default();
  set_memory_planning_default(false);
  const LlamaOptions o = llama_tiny();
  auto m = build_llama(*be, o);
  set_memory_planning_default(planned);
  test::expect_causal(*be, *m, "output", o.spec.vocab, o.batch, o.seq_len, 5);
}

TEST(Llama, ParameterCountsFollowTheFormulaAndMetasPublishedCount) {
  LlamaSpec one_b = llama_spec(1498);
  EXPECT_EQ(llama_param_count(one_b), 1498482688);
  one_b.tied = true;
  EXPECT_EQ(llama_param_count(one_b), 1235814400);  // Llama 3.2 1B as Meta publishes it
  EXPECT_EQ(llama_param_count(llama_spec(45)), 44831232);
  auto be = make_cpu_backend();
  for (LlamaSpec s : {llama_spec(1498), one_b, llama_spec(45), llama_tiny().spec}) {
    LlamaOptions o;
    o.spec = s;
    o.batch = 1;
    o.seq_len = 16;
    o.build_only = true;
    EXPECT_EQ(build_llama(*be, o)->graph().num_params(), llama_param_count(s))
        << s.layers << " layers, tied " << s.tied;
  }
}

TEST(Llama, DecayOnMatricesAndEmbeddingsOnlyAndResidualInit) {
  auto be = make_cpu_backend();
  LlamaOptions o;
  o.spec = llama_spec(45);
  o.batch = 1;
  o.seq_len = 16;
  auto m = build_llama(*be, o);
  int checked = 0;
  for (Param* p : m->graph().params()) {
    const bool norm = p->value.shape().rank() == 1;
    EXPECT_EQ(p->decay, !norm) << p->name;
    if (p->name != "layers.1.attention.wqkv.weight" && p->name != "layers.1.feed_forward.w2.weight")
      continue;
    const test::Vec v = to_host(*be, p->value);
    double sq = 0;
    for (double x : v) sq += x * x;
    const double sd = std::sqrt(sq / static_cast<double>(v.size()));
    const double want = p->name.find("w2") != std::string::npos ? 0.02 / std::sqrt(8.0) : 0.02;
    EXPECT_NEAR(sd, want, 0.03 * want) << p->name;
    ++checked;
  }
  EXPECT_EQ(checked, 2);
}

TEST(Llama, ModelFlopsFollowTheFormula) {
  auto be = make_cpu_backend();
  LlamaOptions o;
  o.spec = llama_spec(45);
  o.batch = 2;
  o.seq_len = 64;
  o.build_only = true;
  auto m = build_llama(*be, o);
  // 6 (N - V C) + 6 L Hq d T with N 44,831,232, V C 16,384,000, L 4, Hq d 512.
  const double per_token = 6.0 * (44831232 - 16384000) + 6.0 * 4 * 512 * 64;
  EXPECT_DOUBLE_EQ(m->model_flops_per_step(), per_token * 2 * 64);
  EXPECT_EQ(m->extra_items_per_step().at("tokens"), 2 * 64);
}

TEST(Llama, RefusesUnknownSizesAndBadHeads) {
  test::expect_error([] { llama_spec(1000); }, {"size:1000", "1498m", "45m"});
  auto be = make_cpu_backend();
  LlamaOptions o = llama_tiny();
  o.spec.kv_heads = 3;
  o.build_only = true;
  test::expect_error([&] { build_llama(*be, o); }, {"Llama", "key/value heads"});
}

}  // namespace
}  // namespace tbd
