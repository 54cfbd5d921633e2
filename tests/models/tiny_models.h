// tests/models/tiny_models.h: every model in its tiny configuration (models/*.h: <model>_tiny()),
// for the tests that go over all of them.
#pragma once

#include <functional>
#include <memory>
#include <ostream>
#include <vector>

#include "models/a3c.h"
#include "models/deepspeech2.h"
#include "models/faster_rcnn.h"
#include "models/gpt2.h"
#include "models/inception_v3.h"
#include "models/llama.h"
#include "models/resnet50.h"
#include "models/seq2seq.h"
#include "models/transformer.h"
#include "models/wgan.h"

namespace tbd::test {

struct TinyModel {
  const char* name;
  std::function<std::unique_ptr<Model>(Backend&)> build;
};
inline void PrintTo(const TinyModel& c, std::ostream* os) { *os << c.name; }

inline std::vector<TinyModel> tiny_models() {
  return {
      {"ResNet50", [](Backend& be) { return build_resnet50(be, resnet50_tiny()); }},
      {"InceptionV3", [](Backend& be) { return build_inception_v3(be, inception_v3_tiny()); }},
      {"Transformer", [](Backend& be) { return build_transformer(be, transformer_tiny()); }},
      {"Seq2Seq", [](Backend& be) { return build_seq2seq(be, seq2seq_tiny()); }},
      {"DeepSpeech2", [](Backend& be) { return build_deepspeech2(be, deepspeech2_tiny()); }},
      {"WGAN", [](Backend& be) { return build_wgan(be, wgan_tiny()); }},
      {"A3C", [](Backend& be) { return build_a3c(be, a3c_tiny(1)); }},
      {"FasterRCNN", [](Backend& be) { return build_faster_rcnn(be, faster_rcnn_tiny()); }},
      {"GPT2", [](Backend& be) { return build_gpt2(be, gpt2_tiny()); }},
      {"Llama", [](Backend& be) { return build_llama(be, llama_tiny()); }},
  };
}

// A test name's suffix: the model's name.
struct TinyModelName {
  template <class Info>
  std::string operator()(const Info& info) const {
    return info.param.name;
  }
};

}  // namespace tbd::test
