// models/registry.h: models register here; the benchmark binary's model fixture iterates them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "models/model.h"

namespace tbd {

// What a builder is given: the batch, the model's parameters beyond it (the name grammar's
// <key>:<value> components, e.g. {"len", 32} from --tbd_seq_len), and whether to stop at the
// graph. A build-only model has every layer constructed (shapes checked, layouts chosen,
// primitives created) but no storage: no parameter arena, activations or optimizer; the layer
// benchmarks walk such graphs.
struct ModelArgs {
  int64_t batch = 1;
  std::map<std::string, int64_t> params;
  bool build_only = false;

  int64_t param(const std::string& key, int64_t fallback) const {
    auto it = params.find(key);
    return it == params.end() ? fallback : it->second;
  }
};

struct ModelEntry {
  std::string name;              // "ResNet50": benchmarks are <name>/train/batch:<N>
  std::vector<int64_t> batches;  // the sweep
  int64_t quick_batch;           // the default (quick) run's batch
  std::function<std::unique_ptr<Model>(Backend&, const ModelArgs&)> build;
  std::vector<std::string> param_keys;  // the ModelArgs::params it reads ({"len"})
  // Parameters every row names, with these values where the run gives none (GPT-2's
  // {"len", 1024}: its rows read .../len:1024 by default); others are named only when given.
  std::map<std::string, int64_t> named_defaults = {};
  // Parameters with a closed set of values (GPT-2's size: 124, 350, 774): anything else is
  // bad input, refused when the flags are read.
  std::map<std::string, std::vector<int64_t>> allowed_values = {};
};

bool register_model(ModelEntry e);
const std::vector<ModelEntry>& model_registry();

#define TBD_REGISTER_MODEL(...)                                         \
  static const bool TBD_LAYER_CONCAT(tbd_registered_model_, __LINE__) = \
      ::tbd::register_model(__VA_ARGS__)

}  // namespace tbd
