// models/breakdown.h: per-layer breakdown of one training step (F4's drill-down).
//
// Runs the model's step node by node and times each layer's forward and backward (host clock
// around each call after a device synchronize on CPU; on CUDA the kernel time attributed to
// the layer through CUPTI external correlation when a CounterSession is given), plus the
// gradient zeroing and the optimizer update. The rows add up to the instrumented step; the
// un-instrumented step time is measured alongside so the gap is visible (`coverage`).
#pragma once

#include <string>
#include <vector>

#include "core/counters.h"
#include "models/model.h"

namespace tbd {

struct LayerTiming {
  std::string name;      // graph node name ("layer2.0.conv2")
  std::string kind;      // "Conv2d"
  std::string problem;   // Layer::describe()
  double fwd_s = 0;      // mean seconds per step
  double bwd_s = 0;
  Flops flops;
  std::size_t param_bytes = 0;   // weights + weight gradients
  std::size_t output_bytes = 0;  // activations this layer produces (feature maps)
};

struct StepBreakdown {
  std::vector<LayerTiming> layers;
  double zero_grad_s = 0;
  double optimizer_s = 0;
  double optimizer_flops = 0;
  double sum_s = 0;   // all rows + zero_grad + optimizer
  double step_s = 0;  // mean un-instrumented train_step() time
  bool from_device_counters = false;  // kernel time from CUPTI instead of host timers
};

// Measures `steps` instrumented steps (after one warm-up) and `steps` plain ones.
StepBreakdown measure_breakdown(Model& m, int steps = 3, CounterSession* counters = nullptr);

// A console table: layer, kind, fwd ms, bwd ms, GFLOP, GFLOP/s, share of step, memory.
std::string format_breakdown(const StepBreakdown& b, const std::string& title);

}  // namespace tbd
