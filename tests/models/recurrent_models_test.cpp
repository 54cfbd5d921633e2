// tests/models/recurrent_models_test.cpp: Seq2Seq and Deep Speech 2: tiny configurations
// overfit one batch on the CPU and rerun identically; the full configurations, built without
// storage, have the documented parameter counts; the decoder's steps share one set of weights.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/backends.h"
#include "models/deepspeech2.h"
#include "models/registry.h"
#include "models/seq2seq.h"
#include "tests/models/overfit.h"

namespace tbd {
namespace {

TEST(Seq2Seq, TinyConfigurationOverfitsAndReruns) {
  auto be = make_cpu_backend();
  auto a = losses(*build_seq2seq(*be, seq2seq_tiny()), 100);
  expect_overfits(a);
  auto b = losses(*build_seq2seq(*be, seq2seq_tiny()), 100);
  EXPECT_EQ(a, b);
}

TEST(Seq2Seq, FullConfigurationHasDocumentedParameterCount) {
  auto be = make_cpu_backend();
  Seq2SeqOptions o;
  o.batch = 2;
  o.build_only = true;
  auto m = build_seq2seq(*be, o);
  EXPECT_EQ(seq2seq_param_count(Seq2SeqSpec{}), 27726366);
  EXPECT_EQ(m->graph().num_params(), 27726366);
}

TEST(Seq2Seq, DecoderStepsShareOneSetOfWeights) {
  auto be = make_cpu_backend();
  Seq2SeqOptions o = seq2seq_tiny();
  const int64_t short_count = build_seq2seq(*be, o)->graph().num_params();
  o.spec.tgt_len = 3 * o.spec.tgt_len;
  EXPECT_EQ(build_seq2seq(*be, o)->graph().num_params(), short_count);
  EXPECT_EQ(short_count, seq2seq_param_count(o.spec));
}

TEST(DeepSpeech2, TinyConfigurationOverfitsAndReruns) {
  auto be = make_cpu_backend();
  auto a = losses(*build_deepspeech2(*be, deepspeech2_tiny()), 100);
  expect_overfits(a);
  auto b = losses(*build_deepspeech2(*be, deepspeech2_tiny()), 100);
  EXPECT_EQ(a, b);
}

TEST(DeepSpeech2, FullConfigurationHasDocumentedParameterCount) {
  auto be = make_cpu_backend();
  DeepSpeech2Options o;
  o.batch = 2;
  o.build_only = true;
  auto m = build_deepspeech2(*be, o);
  EXPECT_EQ(deepspeech2_frames_out(o.spec), 485);
  EXPECT_EQ(deepspeech2_param_count(DeepSpeech2Spec{}), 255357853);
  EXPECT_EQ(m->graph().num_params(), 255357853);
}

TEST(DeepSpeech2, TooShortForItsLabelsIsAClearError) {
  auto be = make_cpu_backend();
  DeepSpeech2Options o = deepspeech2_tiny();
  o.spec.label_len = 15;  // 14 frames after the convolutions
  try {
    build_deepspeech2(*be, o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("15 labels per sample cannot be aligned to 14 frames"),
              std::string::npos)
        << e.what();
  }
}

TEST(Models, RecurrentModelsRegisteredWithSweeps) {
  for (const char* name : {"Seq2Seq", "DeepSpeech2"}) {
    const ModelEntry* found = nullptr;
    for (const auto& e : model_registry()) {
      if (e.name == name) found = &e;
    }
    ASSERT_NE(found, nullptr) << name;
    EXPECT_GE(found->batches.size(), 7u) << name;
  }
}

}  // namespace
}  // namespace tbd
