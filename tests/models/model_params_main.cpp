// tests/models/model_params_main.cpp: tbd_model_params prints, as JSON, every registered
// model's parameter count in its full configuration (the registry's builder at batch 1) and
// in the tiny one the model tests train (models/*.h: <model>_tiny()), both from build-only
// graphs (every layer constructed, no storage). tools/peers' tests read it: each PyTorch peer
// must have tbd's count in both configurations.
//
//   {"ResNet50": {"full": 25557032, "tiny": 12810}, ...}
#include <cstdio>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "backends/backends.h"
#include "models/a3c.h"
#include "models/deepspeech2.h"
#include "models/faster_rcnn.h"
#include "models/gpt2.h"
#include "models/inception_v3.h"
#include "models/llama.h"
#include "models/registry.h"
#include "models/resnet50.h"
#include "models/seq2seq.h"
#include "models/transformer.h"
#include "models/wgan.h"

namespace {

// Stored parameters over every graph of the model (the WGAN's two players; a shared value
// is counted once, by its owner). A build-only A3C has only its worker's graph.
int64_t params_of(tbd::Model& m) {
  int64_t n = 0;
  for (std::size_t i = 0; i < m.num_graphs(); ++i) n += m.graph(i).num_params();
  return n;
}

template <class Options, class Build>
std::function<int64_t(tbd::Backend&)> tiny(Options o, Build build) {
  return [o, build](tbd::Backend& be) mutable {
    o.build_only = true;
    return params_of(*build(be, o));
  };
}

}  // namespace

int main() {
  using namespace tbd;
  const std::map<std::string, std::function<int64_t(Backend&)>> tinies = {
      {"ResNet50", tiny(resnet50_tiny(), build_resnet50)},
      {"InceptionV3", tiny(inception_v3_tiny(), build_inception_v3)},
      {"Transformer", tiny(transformer_tiny(), build_transformer)},
      {"Seq2Seq", tiny(seq2seq_tiny(), build_seq2seq)},
      {"DeepSpeech2", tiny(deepspeech2_tiny(), build_deepspeech2)},
      {"WGAN", tiny(wgan_tiny(), build_wgan)},
      {"A3C", tiny(a3c_tiny(1), build_a3c)},
      {"FasterRCNN", tiny(faster_rcnn_tiny(), build_faster_rcnn)},
      {"GPT2", tiny(gpt2_tiny(), build_gpt2)},
      {"Llama", tiny(llama_tiny(), build_llama)},
  };
  try {
    auto be = make_cpu_backend();
    nlohmann::json out = nlohmann::json::object();
    for (const ModelEntry& e : model_registry()) {
      ModelArgs args;
      args.batch = 1;
      args.build_only = true;
      auto full = e.build(*be, args);
      nlohmann::json row = {{"full", params_of(*full)}};
      auto t = tinies.find(e.name);
      row["tiny"] = t == tinies.end() ? nlohmann::json() : nlohmann::json(t->second(*be));
      out[e.name] = row;
    }
    std::printf("%s\n", out.dump(1).c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tbd_model_params: %s\n", e.what());
    return 1;
  }
  return 0;
}
