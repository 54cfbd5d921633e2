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
  bool uses_seq_len = false;     // reads model_params().seq_len (names then carry /len:N)
};

// Run-wide model parameters set from the command line (tbd_bench --tbd_seq_len); builders
// read them, and benchmark names carry every non-default one so rows can be re-run.
struct ModelParams {
  int64_t seq_len = 0;  // 0: the model's default
};
ModelParams& model_params();
// "/len:32" for the non-default parameters, "" otherwise (appended to model benchmark names).
std::string model_params_suffix();

bool register_model(ModelEntry e);
const std::vector<ModelEntry>& model_registry();

#define TBD_REGISTER_MODEL(...) \
  static const bool TBD_LAYER_CONCAT(tbd_registered_model_, __LINE__) = ::tbd::register_model(__VA_ARGS__)

}  // namespace tbd
