// models/registry.cpp: the model registry.
#include "models/registry.h"

namespace tbd {

static std::vector<ModelEntry>& registry() {
  static std::vector<ModelEntry> r;
  return r;
}

bool register_model(ModelEntry e) {
  registry().push_back(std::move(e));
  return true;
}

const std::vector<ModelEntry>& model_registry() { return registry(); }

}  // namespace tbd
