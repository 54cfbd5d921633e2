// models/registry.cpp: the model registry.
#include "models/registry.h"

namespace tbd {

static std::vector<ModelEntry>& registry() {
  static std::vector<ModelEntry> r;
  return r;
}

ModelParams& model_params() {
  static ModelParams p;
  return p;
}

std::string model_params_suffix() {
  return model_params().seq_len > 0 ? "/len:" + std::to_string(model_params().seq_len) : "";
}

bool register_model(ModelEntry e) {
  registry().push_back(std::move(e));
  return true;
}

const std::vector<ModelEntry>& model_registry() { return registry(); }

}  // namespace tbd
