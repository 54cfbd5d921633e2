// models/breakdown.h: per-layer breakdown of one training step (a step down to its layers).
//
// Runs the model's step node by node and times each layer's forward and backward (host clock
// around each call after a device synchronize on CPU; on CUDA the kernel time attributed to
// the layer through CUPTI external correlation when a CounterSession is given), plus the
// gradient zeroing, the optimizer update and the parts' input preparation. It runs the model's
// step plan (Model::step_plan): a model whose step has several parts (WGAN-GP's generator step
// and its 5 critic steps; A3C's rollout forwards and its updates) gets rows for every part's
// nodes, labelled "<part>:<node>", each counting the part's runs per step; zero_grad,
// optimizer and prepare are summed over the parts. A row's FLOPs and bytes are the phases the node
// runs (Graph::executed_flops). The rows add up to the instrumented step; the un-instrumented step
// time is measured alongside so the gap is visible (`coverage`).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/counters.h"
#include "core/roofline.h"
#include "models/model.h"

namespace tbd {

struct LayerTiming {
  std::string name;     // graph node name ("layer2.0.conv2")
  std::string kind;     // "Conv2d"
  std::string problem;  // Layer::describe()
  double fwd_s = 0;     // mean seconds per step
  double bwd_s = 0;
  // Where the layer computes its backward as two calls (Layer::split_backward): each one's
  // time where that phase runs in the step (bwd_s is their sum); else unset.
  std::optional<double> dgrad_s, wgrad_s;
  bool split_backward = false;   // false: one library call computes every gradient
  Flops flops;                   // of the phases that run, per step
  Bytes bytes;                   // analytic bytes moved (a lower bound, layers/layer.h)
  std::size_t param_bytes = 0;   // weights + weight gradients
  std::size_t output_bytes = 0;  // activations this layer produces (feature maps)
};

struct StepBreakdown {
  std::vector<LayerTiming> layers;
  double zero_grad_s = 0;
  double optimizer_s = 0;
  double optimizer_flops = 0;
  double optimizer_bytes = 0;
  double zero_grad_bytes = 0;         // every gradient written once (Graph::zero_grad_bytes)
  double prepare_s = 0;               // the parts' input preparation (StepPart::prepare)
  double prepare_bytes = 0;           // and its bytes (StepPart::prepare_bytes)
  double sum_s = 0;                   // all rows + zero_grad + optimizer + prepare
  double step_s = 0;                  // mean un-instrumented train_step() time
  bool from_device_counters = false;  // kernel time from CUPTI instead of host timers
};

// Measures `steps` instrumented steps (after one warm-up) and `steps` plain ones.
StepBreakdown measure_breakdown(Model& m, int steps = 3, CounterSession* counters = nullptr);

// The roofline columns of one row (core/roofline.h), from its FLOPs, bytes and time; each
// field is absent (nullopt, or "-" for bound) where it does not apply: no bytes, no time, an
// unknown roof. A row with bytes but no FLOPs is memory-bound and gets
// bandwidth_utilization instead of an intensity and a roofline utilization.
struct RowRoofline {
  std::optional<double> arithmetic_intensity;   // FLOP/byte
  std::optional<double> roofline_utilization;   // achieved FLOP/s over the roof
  std::optional<double> bandwidth_utilization;  // bytes/s over peak bandwidth (no FLOPs)
  std::string bound = "-";                      // "mem", "comp" or "-"
};
RowRoofline row_roofline(double flop, double bytes, double seconds, const Roofline& roofline);

// A console table: layer, kind, fwd ms, bwd ms, GFLOP, GFLOP/s, MB moved (fwd + bwd),
// FLOP/byte, bound, roofline utilization (bandwidth utilization for rows without FLOPs),
// share of step, memory. Within 130 columns.
std::string format_breakdown(const StepBreakdown& b, const std::string& title,
                             const Roofline& roofline = {});

}  // namespace tbd
