// models/registry.h: models register here; the benchmark binary's model fixture iterates them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "models/model.h"

namespace tbd {

struct ModelEntry {
  std::string name;              // "ResNet50": benchmarks are <name>/train/batch:<N>
  std::vector<int64_t> batches;  // the sweep
  int64_t quick_batch;           // the default (quick) run's batch
  std::function<std::unique_ptr<Model>(Backend&, int64_t batch)> build;
};

bool register_model(ModelEntry e);
const std::vector<ModelEntry>& model_registry();

#define TBD_REGISTER_MODEL(...) \
  static const bool TBD_LAYER_CONCAT(tbd_registered_model_, __LINE__) = ::tbd::register_model(__VA_ARGS__)

}  // namespace tbd
