// models/breakdown.cpp: per-layer timing of a training step.
#include "models/breakdown.h"

#include <chrono>
#include <cstdio>
#include <functional>
#include <sstream>

namespace tbd {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

using Phase = Model::Phase;

// One step as the plan says (Model::run_pass), node by node, every call through
// around(phase, row, run): a layer's forward, its whole backward or its data and weight
// gradients apart (Layer::split_backward), and a part's prepare, zero_grad, optimizer. `row`
// is the node's breakdown row (one per node of every part, in part order), 0 for the
// part-wide calls. A phase that does not run in the graph (conv1's data gradient:
// Graph::runs_dgrad) is not called.
void walk_step(
    Model& m, const std::function<void(Phase, std::size_t, const std::function<void()>&)>& around) {
  std::size_t row0 = 0;
  for (const Model::StepPart& part : m.step_plan()) {
    Graph& g = m.graph(part.graph);
    const std::size_t n = g.nodes().size();
    const bool fwd_only = part.optimizer == Model::kForwardOnly;
    for (int k = 0; k < part.times; ++k) {
      if (part.prepare) around(Phase::kPrepare, 0, [&] { part.prepare(k); });
      if (!fwd_only) around(Phase::kZeroGrad, 0, [&] { g.zero_grad(); });
      if (part.reuses_params(k)) g.reuse_param_copies();
      for (std::size_t i = 0; i < n; ++i)
        around(Phase::kForward, row0 + i, [&] { g.forward_node(i); });
      if (fwd_only) continue;
      g.seed_loss_grad();
      for (std::size_t i = n; i-- > 0;) {
        if (!g.nodes()[i].layer->split_backward()) {
          around(Phase::kBackward, row0 + i, [&] { g.backward_node(i); });
          continue;
        }
        if (g.runs_dgrad(i)) around(Phase::kDgrad, row0 + i, [&] { g.backward_node_data(i); });
        if (g.runs_wgrad(i)) around(Phase::kWgrad, row0 + i, [&] { g.backward_node_weights(i); });
      }
      around(Phase::kOptimizer, 0, [&] { m.optimizer(part.optimizer).step(); });
    }
    row0 += n;
  }
}

}  // namespace

StepBreakdown measure_breakdown(Model& m, int steps, CounterSession* counters) {
  Backend& be = m.backend();
  const std::vector<Model::StepPart>& parts = m.step_plan();
  // One row per node of every part, in part order (a part's rows count its `times` runs).
  StepBreakdown b;
  for (const Model::StepPart& part : parts) {
    Graph& g = m.graph(part.graph);
    const double times = part.times;
    for (std::size_t i = 0; i < g.nodes().size(); ++i) {
      Layer& l = *g.nodes()[i].layer;
      LayerTiming t;
      t.name = part.label.empty() ? l.name() : part.label + ":" + l.name();
      t.kind = l.kind();
      t.problem = l.describe();
      t.split_backward = l.split_backward();
      // The phases that run (Model::pass_flops), per step.
      const Flops f = m.pass_flops(part, i);
      const Bytes by = m.pass_bytes(part, i);
      t.flops = Flops{f.fprop * times, f.dgrad * times, f.wgrad * times};
      t.bytes = Bytes{by.fprop * times, by.dgrad * times, by.wgrad * times};
      for (const Param& p : l.params()) {
        if (!p.tied) t.param_bytes += p.value.bytes() + p.grad.bytes();
      }
      for (const TensorDesc& d : l.output_descs()) t.output_bytes += d.bytes();
      b.layers.push_back(std::move(t));
    }
    b.prepare_bytes += times * part.prepare_bytes;
    if (part.optimizer == Model::kForwardOnly) continue;
    b.optimizer_flops += times * m.optimizer(part.optimizer).flops();
    b.optimizer_bytes += times * m.optimizer(part.optimizer).bytes();
    b.zero_grad_bytes += times * g.zero_grad_bytes();
  }
  m.train_step();  // warm-up
  be.synchronize();

  // Plain steps: the reference the rows must add up to.
  double t0 = now_s();
  for (int s = 0; s < steps; ++s) m.train_step();
  be.synchronize();
  b.step_s = (now_s() - t0) / steps;

  auto timed = [&](auto&& fn) {
    be.synchronize();
    double a = now_s();
    fn();
    be.synchronize();
    return now_s() - a;
  };
  // Each part as the step runs it, `times` in a row; rows accumulate per step.
  for (int s = 0; s < steps; ++s) {
    walk_step(m, [&](Phase c, std::size_t row, const std::function<void()>& run) {
      const double t = timed(run);
      switch (c) {
        case Phase::kPrepare:
          b.prepare_s += t;
          return;
        case Phase::kZeroGrad:
          b.zero_grad_s += t;
          return;
        case Phase::kOptimizer:
          b.optimizer_s += t;
          return;
        case Phase::kForward:
          b.layers[row].fwd_s += t;
          return;
        case Phase::kBackward:
          b.layers[row].bwd_s += t;
          return;
        case Phase::kDgrad:
          b.layers[row].dgrad_s = b.layers[row].dgrad_s.value_or(0) + t;
          b.layers[row].bwd_s += t;
          return;
        case Phase::kWgrad:
          b.layers[row].wgrad_s = b.layers[row].wgrad_s.value_or(0) + t;
          b.layers[row].bwd_s += t;
          return;
      }
    });
  }
  b.zero_grad_s /= steps;
  b.optimizer_s /= steps;
  b.prepare_s /= steps;
  b.sum_s = b.zero_grad_s + b.optimizer_s + b.prepare_s;
  for (auto& t : b.layers) {
    t.fwd_s /= steps;
    t.bwd_s /= steps;
    if (t.dgrad_s) *t.dgrad_s /= steps;
    if (t.wgrad_s) *t.wgrad_s /= steps;
    b.sum_s += t.fwd_s + t.bwd_s;
  }

  // On CUDA, replace host timings by CUPTI kernel time per layer where available (tags: 3r for
  // row r's forward, 3r + 1 for its backward or its data gradient, 3r + 2 for its weight
  // gradients, -1 zero_grad, -2 the optimizer, -3 the parts' input preparation).
  if (counters != nullptr) {
    DeviceCounters dc = counters->measure_timeline([&] {
      walk_step(m, [&](Phase c, std::size_t row, const std::function<void()>& run) {
        const int r = static_cast<int>(row);
        int tag = 0;
        switch (c) {
          case Phase::kPrepare:
            tag = -3;
            break;
          case Phase::kZeroGrad:
            tag = -1;
            break;
          case Phase::kOptimizer:
            tag = -2;
            break;
          case Phase::kForward:
            tag = 3 * r;
            break;
          case Phase::kBackward:
          case Phase::kDgrad:
            tag = 3 * r + 1;
            break;
          case Phase::kWgrad:
            tag = 3 * r + 2;
            break;
        }
        counters->push_tag(tag);
        run();
        counters->pop_tag();
      });
      be.synchronize();
    });
    if (!dc.kernel_s_by_tag.empty()) {
      b.from_device_counters = true;
      b.sum_s = 0;
      auto tagged = [&](std::size_t tag) {
        auto it = dc.kernel_s_by_tag.find(static_cast<int>(tag));
        return it == dc.kernel_s_by_tag.end() ? 0.0 : it->second;
      };
      for (std::size_t r = 0; r < b.layers.size(); ++r) {
        LayerTiming& t = b.layers[r];
        t.fwd_s = tagged(3 * r);
        t.bwd_s = tagged(3 * r + 1) + tagged(3 * r + 2);
        if (t.dgrad_s) t.dgrad_s = tagged(3 * r + 1);
        if (t.wgrad_s) t.wgrad_s = tagged(3 * r + 2);
        b.sum_s += t.fwd_s + t.bwd_s;
      }
      auto z = dc.kernel_s_by_tag.find(-1), o = dc.kernel_s_by_tag.find(-2),
           pr = dc.kernel_s_by_tag.find(-3);
      b.zero_grad_s = z == dc.kernel_s_by_tag.end() ? 0 : z->second;
      b.optimizer_s = o == dc.kernel_s_by_tag.end() ? 0 : o->second;
      b.prepare_s = pr == dc.kernel_s_by_tag.end() ? 0 : pr->second;
      b.sum_s += b.zero_grad_s + b.optimizer_s + b.prepare_s;
    }
  }
  return b;
}

RowRoofline row_roofline(double flop, double bytes, double seconds, const Roofline& roofline) {
  RowRoofline r;
  if (bytes <= 0) return r;
  if (flop > 0) {
    const double intensity = flop / bytes;
    r.arithmetic_intensity = intensity;
    if (roofline.known()) {
      r.bound = roofline.memory_bound(intensity) ? "mem" : "comp";
      if (seconds > 0) r.roofline_utilization = flop / seconds / roofline.roof(intensity);
    }
  } else {
    r.bound = "mem";
    if (roofline.peak_bytes_per_s > 0 && seconds > 0) {
      r.bandwidth_utilization = bytes / seconds / roofline.peak_bytes_per_s;
    }
  }
  return r;
}

std::string format_breakdown(const StepBreakdown& b, const std::string& title,
                             const Roofline& roofline) {
  std::ostringstream os;
  char line[512];
  os << title << " — per-layer breakdown ("
     << (b.from_device_counters ? "CUPTI kernel time" : "host timers") << ")\n";
  std::snprintf(line, sizeof(line), "%-31s %-19s %8s %8s %8s %8s %7s %7s %8s %6s %5s %6s %6s %8s\n",
                "layer", "kind", "fwd ms", "bwd ms", "dgrad ms", "wgrad ms", "GFLOP", "GFLOP/s",
                "MB", "FLOP/B", "bound", "roof", "share", "mem MiB");
  os << line;
  // A fraction as a percentage, or seconds as milliseconds; '-' where the value is absent.
  enum class As { kPercent, kMs };
  auto shown = [](const std::optional<double>& v, As as) {
    char s[32] = "-";
    if (v && as == As::kPercent) std::snprintf(s, sizeof(s), "%.1f%%", *v * 100);
    if (v && as == As::kMs) std::snprintf(s, sizeof(s), "%.3f", *v * 1e3);
    return std::string(s);
  };
  auto row = [&](const std::string& name, const std::string& kind, double f, double bw,
                 const std::optional<double>& dg, const std::optional<double>& wg, double flop,
                 double bytes, std::size_t mem) {
    double t = f + bw;
    RowRoofline rr = row_roofline(flop, bytes, t, roofline);
    char ai[32] = "-";
    if (rr.arithmetic_intensity) std::snprintf(ai, sizeof(ai), "%.1f", *rr.arithmetic_intensity);
    std::string roof = shown(
        rr.roofline_utilization ? rr.roofline_utilization : rr.bandwidth_utilization, As::kPercent);
    std::snprintf(line, sizeof(line),
                  "%-31.31s %-19.19s %8.3f %8.3f %8s %8s %7.3f %7.1f %8.1f %6s %5s %6s %5.1f%% "
                  "%8.2f\n",
                  name.c_str(), kind.c_str(), f * 1e3, bw * 1e3, shown(dg, As::kMs).c_str(),
                  shown(wg, As::kMs).c_str(), flop * 1e-9, t > 0 ? flop / t * 1e-9 : 0.0,
                  bytes * 1e-6, ai, rr.bound.c_str(), roof.c_str(),
                  b.sum_s > 0 ? 100.0 * t / b.sum_s : 0.0, static_cast<double>(mem) / (1 << 20));
    os << line;
  };
  for (const auto& t : b.layers) {
    row(t.name, t.kind, t.fwd_s, t.bwd_s, t.dgrad_s, t.wgrad_s, t.flops.total(), t.bytes.total(),
        t.param_bytes + t.output_bytes);
  }
  if (b.prepare_bytes > 0 || b.prepare_s > 0)
    row("(prepare)", "-", b.prepare_s, 0, {}, {}, 0, b.prepare_bytes, 0);
  row("(zero_grad)", "-", 0, b.zero_grad_s, {}, {}, 0, b.zero_grad_bytes, 0);
  row("(optimizer)", "-", 0, b.optimizer_s, {}, {}, b.optimizer_flops, b.optimizer_bytes, 0);
  std::snprintf(line, sizeof(line),
                "sum of rows %.3f ms; un-instrumented step %.3f ms; rows/step = %.1f%%\n",
                b.sum_s * 1e3, b.step_s * 1e3, b.step_s > 0 ? 100.0 * b.sum_s / b.step_s : 0.0);
  os << line;
  os << "dgrad/wgrad '-': one library call computes the layer's gradients (a fused RNN backward, "
        "oneDNN's batch normalization, ...), or that phase does not run in this step\n";
  return os.str();
}

}  // namespace tbd
