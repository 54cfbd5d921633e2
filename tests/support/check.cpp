// tests/support/check.cpp: comparison, finite differences and the layer harness.
#include "tests/support/check.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <sstream>

#include "core/bf16.h"
#include "core/random.h"

namespace tbd::test {

bool expect_close(const std::string& what, const Vec& got, const Vec& ref, Tol tol) {
  if (got.size() != ref.size()) {
    ADD_FAILURE() << what << ": size " << got.size() << " vs reference " << ref.size();
    return false;
  }
  double max_abs = 0, max_rel = 0;
  int64_t bad = 0;
  std::ostringstream first;
  for (std::size_t i = 0; i < got.size(); ++i) {
    double err = std::fabs(got[i] - ref[i]);
    bool ok = err <= tol.atol + tol.rtol * std::fabs(ref[i]);
    if (std::isnan(got[i]) != std::isnan(ref[i])) ok = false;
    max_abs = std::max(max_abs, err);
    if (std::fabs(ref[i]) > 1e-12) max_rel = std::max(max_rel, err / std::fabs(ref[i]));
    if (!ok) {
      if (bad < 5) first << "\n  [" << i << "] got " << got[i] << " ref " << ref[i];
      ++bad;
    }
  }
  if (bad) {
    ADD_FAILURE() << what << ": " << bad << " of " << got.size()
                  << " elements out of tolerance (atol " << tol.atol << ", rtol " << tol.rtol
                  << "); max abs err " << max_abs << ", max rel err " << max_rel
                  << "; first mismatches:" << first.str();
  }
  return bad == 0;
}

static double dot_loss(const std::vector<Vec>& y, const std::vector<Vec>& dy) {
  double s = 0;
  for (std::size_t k = 0; k < y.size() && k < dy.size(); ++k) {
    for (std::size_t i = 0; i < y[k].size(); ++i) s += y[k][i] * dy[k][i];
  }
  return s;
}

void check_reference_gradients(const RefForward& fwd, const RefBackward& bwd,
                               const std::vector<Vec>& x, const std::vector<Vec>& params,
                               const std::vector<Vec>& dy, const std::vector<bool>& x_needs_grad,
                               int samples, Tol tol) {
  RefGrads g = bwd(x, params, dy);
  Rng rng(1234);
  auto probe = [&](bool is_param, std::size_t which, const Vec& analytic, const char* label) {
    const Vec& base = is_param ? params[which] : x[which];
    ASSERT_EQ(analytic.size(), base.size()) << label << " " << which << ": gradient size";
    int n = std::min<int64_t>(samples, static_cast<int64_t>(base.size()));
    Vec got, want;
    for (int s = 0; s < n; ++s) {
      std::size_t i = n == static_cast<int64_t>(base.size()) ? s : rng.randint(0, base.size());
      auto xp = x, pp = params;
      Vec& v = is_param ? pp[which] : xp[which];
      double orig = v[i];
      v[i] = orig + kFdEps;
      double lp = dot_loss(fwd(xp, pp), dy);
      v[i] = orig - kFdEps;
      double lm = dot_loss(fwd(xp, pp), dy);
      got.push_back(analytic[i]);
      want.push_back((lp - lm) / (2 * kFdEps));
    }
    expect_close(
        std::string("finite differences of reference ") + label + " " + std::to_string(which), got,
        want, tol);
  };
  for (std::size_t k = 0; k < x.size(); ++k) {
    if (k < x_needs_grad.size() && x_needs_grad[k]) probe(false, k, g.dx.at(k), "dx");
  }
  for (std::size_t k = 0; k < params.size(); ++k) probe(true, k, g.dparams.at(k), "dparam");
}

void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    std::string m = e.what();
    for (const auto& p : parts) EXPECT_NE(m.find(p), std::string::npos) << m;
  }
}

Vec to_host(Backend& be, const Tensor& t) {
  Vec out(t.numel());
  if (t.dtype() == DType::kU8) {
    std::vector<uint8_t> h(t.numel());
    be.copy_to_host(h.data(), t);
    std::copy(h.begin(), h.end(), out.begin());
  } else if (t.dtype() == DType::kI32) {
    std::vector<int32_t> h(t.numel());
    be.copy_to_host(h.data(), t);
    std::copy(h.begin(), h.end(), out.begin());
  } else if (t.dtype() == DType::kBF16) {
    std::vector<uint16_t> h(t.numel());
    be.copy_to_host(h.data(), t);
    for (std::size_t i = 0; i < h.size(); ++i) out[i] = f32_from_bf16(h[i]);
  } else {
    std::vector<float> h(t.numel());
    be.copy_to_host(h.data(), t);
    std::copy(h.begin(), h.end(), out.begin());
  }
  return out;
}

void from_host(Backend& be, const Tensor& t, const Vec& v) {
  if (t.dtype() == DType::kU8) {
    std::vector<uint8_t> h(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) h[i] = static_cast<uint8_t>(v[i]);
    be.copy_from_host(t, h.data());
  } else if (t.dtype() == DType::kI32) {
    std::vector<int32_t> h(v.begin(), v.end());
    be.copy_from_host(t, h.data());
  } else if (t.dtype() == DType::kBF16) {  // rounded to nearest even
    std::vector<uint16_t> h(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) h[i] = bf16_from_f32(static_cast<float>(v[i]));
    be.copy_from_host(t, h.data());
  } else {
    std::vector<float> h(v.begin(), v.end());
    be.copy_from_host(t, h.data());
  }
}

std::vector<Vec> forward_values(Backend& be, Layer& layer, const std::vector<Vec>& values) {
  std::vector<Tensor> x, y;
  std::vector<const Tensor*> xs;
  std::vector<Tensor*> ys;
  for (std::size_t k = 0; k < values.size(); ++k) {
    x.push_back(be.empty(layer.input_descs().at(k), MemCategory::kDynamic));
    from_host(be, x.back(), values[k]);
  }
  for (const TensorDesc& d : layer.output_descs()) y.push_back(be.empty(d, MemCategory::kDynamic));
  for (const Tensor& t : x) xs.push_back(&t);
  for (Tensor& t : y) ys.push_back(&t);
  layer.forward(ys, xs);
  std::vector<Vec> out;
  for (const Tensor& t : y) out.push_back(to_host(be, t));
  return out;
}

Vec random_vec(int64_t n, uint64_t seed, double lo, double hi) {
  Rng rng(seed);
  Vec v(n);
  for (auto& e : v) e = rng.uniform(lo, hi);
  return v;
}

// Round to float32 so that the reference sees exactly what the layer sees.
static Vec as_f32(Vec v) {
  for (auto& e : v) e = static_cast<float>(e);
  return v;
}

// ---- targets ----

const char* to_string(Target t) {
  switch (t) {
    case Target::kCpu:
      return "cpu";
    case Target::kCudaFp32:
      return "cuda_fp32";
    case Target::kCudaTf32:
      return "cuda_tf32";
  }
  return "?";
}

Target target_of(const Backend& be) {
  if (be.kind() == DeviceKind::kCpu) return Target::kCpu;
  return be.math_mode() == MathMode::kTf32 ? Target::kCudaTf32 : Target::kCudaFp32;
}

namespace {

// The process's backends, one per device kind (the CUDA one serves both of its targets),
// released by GoogleTest's environment teardown: before main returns, while the CUDA runtime
// is still up.
class TargetBackends : public ::testing::Environment {
 public:
  static TargetBackends& get() {
    static TargetBackends* const env = [] {
      auto* e = new TargetBackends;
      ::testing::AddGlobalTestEnvironment(e);  // GoogleTest owns it
      return e;
    }();
    return *env;
  }
  void TearDown() override {
    cuda_.reset();
    cpu_.reset();
  }
  Backend* cpu() {
    if (!cpu_) cpu_ = make_cpu_backend();
    return cpu_.get();
  }
  Backend* cuda(std::string* why) {
    if (!cuda_) {
      if (!cuda_usable(why)) return nullptr;
      cuda_ = make_backend(BackendChoice::kCuda);
    }
    return cuda_.get();
  }

 private:
  std::unique_ptr<Backend> cpu_, cuda_;
};

// Registered before RUN_ALL_TESTS (GoogleTest calls an environment's SetUp and TearDown only
// if it was added before), from this file's static initialisation.
[[maybe_unused]] const TargetBackends& kRegistered = TargetBackends::get();

}  // namespace

Backend* target_backend(Target t, std::string* why) {
  TargetBackends& env = TargetBackends::get();
  if (t == Target::kCpu) return env.cpu();
  Backend* be = env.cuda(why);
  if (be) be->set_math_mode(t == Target::kCudaTf32 ? MathMode::kTf32 : MathMode::kFp32);
  return be;
}

void expect_same_contract(const Layer& cpu, const Layer& other) {
  ASSERT_EQ(cpu.output_descs().size(), other.output_descs().size()) << other.name() << ": outputs";
  for (std::size_t k = 0; k < cpu.output_descs().size(); ++k) {
    EXPECT_EQ(cpu.output_descs()[k].shape, other.output_descs()[k].shape) << "output " << k;
    EXPECT_EQ(cpu.output_descs()[k].dtype, other.output_descs()[k].dtype) << "output " << k;
  }
  ASSERT_EQ(cpu.params().size(), other.params().size()) << other.name() << ": parameters";
  for (std::size_t k = 0; k < cpu.params().size(); ++k) {
    const Param& a = cpu.params()[k];
    const Param& b = other.params()[k];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.value.shape(), b.value.shape()) << b.name;
    EXPECT_EQ(a.init, b.init) << b.name;
    EXPECT_EQ(a.decay, b.decay) << b.name;
  }
  EXPECT_DOUBLE_EQ(cpu.flops().fprop, other.flops().fprop);
  EXPECT_DOUBLE_EQ(cpu.flops().dgrad, other.flops().dgrad);
  EXPECT_DOUBLE_EQ(cpu.flops().wgrad, other.flops().wgrad);
  EXPECT_DOUBLE_EQ(cpu.bytes().fprop, other.bytes().fprop);
  EXPECT_DOUBLE_EQ(cpu.bytes().dgrad, other.bytes().dgrad);
  EXPECT_DOUBLE_EQ(cpu.bytes().wgrad, other.bytes().wgrad);
}

// ---- the layer harness ----

void check_layer(Backend& be, Layer& layer, const RefForward& fwd, const RefBackward& bwd,
                 const LayerCheckOptions& opt) {
  const Target target = target_of(be);
  const Tol fwd_tol = tolerance(target, Phase::kFprop, opt.op_class);
  const Tol dgrad_tol = tolerance(target, Phase::kDgrad, opt.op_class);
  const Tol wgrad_tol = tolerance(target, Phase::kWgrad, opt.op_class);
  SCOPED_TRACE(std::string("target ") + to_string(target));
  layer.set_training(opt.training);
  const auto& in = layer.input_descs();
  const auto& out = layer.output_descs();
  std::vector<Tensor> x, y, dx, dy;
  std::vector<Vec> xh, ph, dyh;
  std::vector<bool> needs(in.size());
  for (std::size_t k = 0; k < in.size(); ++k) {
    needs[k] = k < opt.x_needs_grad.size() ? opt.x_needs_grad[k] : in[k].dtype == DType::kF32;
    x.push_back(be.empty(in[k], MemCategory::kDynamic));
    Vec v;
    if (auto it = opt.x_values.find(static_cast<int>(k)); it != opt.x_values.end()) {
      v = it->second;
      ASSERT_EQ(static_cast<int64_t>(v.size()), in[k].shape.numel()) << "x_values " << k;
    } else if (in[k].dtype == DType::kI32 || in[k].dtype == DType::kU8) {
      Rng rng(opt.seed * 131 + k);
      v.resize(in[k].shape.numel());
      for (auto& e : v) e = static_cast<double>(rng.randint(opt.int_lo, opt.int_hi));
    } else {
      v = as_f32(random_vec(in[k].shape.numel(), opt.seed * 31 + k, opt.x_lo, opt.x_hi));
    }
    from_host(be, x.back(), v);
    xh.push_back(v);
    dx.push_back(be.empty(in[k], MemCategory::kDynamic));
    // A sentinel, not zero: input gradients are assigned (=), so a layer that accumulates
    // into dx, or leaves elements unwritten, fails the comparison.
    if (in[k].dtype == DType::kF32) be.fill(dx.back(), 1234.5f);
  }
  for (std::size_t k = 0; k < out.size(); ++k) {
    y.push_back(be.empty(out[k], MemCategory::kFeatureMaps));
    dy.push_back(be.empty(out[k], MemCategory::kDynamic));
    Vec v = as_f32(random_vec(out[k].shape.numel(), opt.seed * 77 + k));
    from_host(be, dy.back(), v);
    dyh.push_back(v);
  }
  std::vector<Vec> grad_start;
  for (std::size_t k = 0; k < layer.params().size(); ++k) {
    Param& p = layer.params()[k];
    Vec v = as_f32(random_vec(p.value.numel(), opt.seed * 1000 + k, -opt.p_range, opt.p_range));
    from_host(be, p.value, v);
    ph.push_back(v);
    // Start the gradient at a known non-zero value: backward must accumulate onto it.
    Vec g0 = as_f32(random_vec(p.grad.numel(), opt.seed * 2000 + k, -0.25, 0.25));
    from_host(be, p.grad, g0);
    grad_start.push_back(g0);
  }

  // Backward gets what the kind saves and null for the rest, as a graph passes them: an
  // implementation that reads a tensor its contract does not save fails here.
  std::vector<const Tensor*> xp, yp, dyp, xb, yb;
  std::vector<Tensor*> yw, dxw;
  for (std::size_t k = 0; k < x.size(); ++k) {
    xp.push_back(&x[k]);
    xb.push_back(layer.saves_input(k) ? &x[k] : nullptr);
    dxw.push_back(needs[k] ? &dx[k] : nullptr);
  }
  for (std::size_t k = 0; k < y.size(); ++k) {
    yp.push_back(&y[k]);
    yb.push_back(layer.saves_output(k) ? &y[k] : nullptr);
    yw.push_back(&y[k]);
    dyp.push_back(&dy[k]);
  }
  be.synchronize();
  const uint64_t allocs_before = be.allocator().stats().num_allocations;
  layer.forward(yw, xp);
  layer.backward(dxw, dyp, xb, yb);
  be.synchronize();
  EXPECT_EQ(be.allocator().stats().num_allocations, allocs_before)
      << layer.name() << ": forward/backward allocated";

  std::vector<Vec> yref = fwd(xh, ph);
  ASSERT_EQ(yref.size(), y.size()) << layer.name() << ": reference output count";
  for (std::size_t k = 0; k < y.size(); ++k) {
    expect_close(layer.name() + " forward y" + std::to_string(k), to_host(be, y[k]), yref[k],
                 fwd_tol);
  }
  RefGrads g = bwd(xh, ph, dyh);
  for (std::size_t k = 0; k < x.size(); ++k) {
    if (!needs[k]) continue;
    expect_close(layer.name() + " backward dx" + std::to_string(k), to_host(be, dx[k]), g.dx.at(k),
                 dgrad_tol);
  }
  for (std::size_t k = 0; k < layer.params().size(); ++k) {
    Vec want = g.dparams.at(k);
    for (std::size_t i = 0; i < want.size(); ++i) want[i] += grad_start[k][i];
    expect_close(layer.params()[k].name + " gradient (accumulated)",
                 to_host(be, layer.params()[k].grad), want, wgrad_tol);
  }
  // With parameter gradients off (a frozen layer, the other player's layers in a GAN step),
  // backward leaves every Param::grad exactly as it was and still computes the input
  // gradients: the reference's, whenever the forward repeats itself (layers with dropout
  // draw a new mask per forward; for them only the parameter gradients are checked).
  if (!layer.params().empty()) {
    std::vector<Vec> before, y_before;
    for (const Param& p : layer.params()) before.push_back(to_host(be, p.grad));
    for (const Tensor& t : y) y_before.push_back(to_host(be, t));
    for (std::size_t k = 0; k < x.size(); ++k) {
      if (needs[k]) be.fill(dx[k], 1234.5f);
    }
    layer.set_param_grads(false);
    layer.forward(yw, xp);
    layer.backward(dxw, dyp, xb, yb);
    be.synchronize();
    layer.set_param_grads(true);
    for (std::size_t k = 0; k < layer.params().size(); ++k) {
      EXPECT_EQ(to_host(be, layer.params()[k].grad), before[k])
          << layer.params()[k].name << ": changed by a backward with parameter gradients off";
    }
    bool same_forward = true;
    for (std::size_t k = 0; k < y.size(); ++k) same_forward &= to_host(be, y[k]) == y_before[k];
    for (std::size_t k = 0; k < x.size() && same_forward; ++k) {
      if (!needs[k]) continue;
      expect_close(layer.name() + " backward dx" + std::to_string(k) + " (parameter gradients off)",
                   to_host(be, dx[k]), g.dx.at(k), dgrad_tol);
    }
  }
  // Split implementations (Layer::split_backward): backward_data alone gives the reference's
  // input gradients and leaves the parameter gradients exactly as they were; backward_weights
  // alone adds the reference's parameter gradients and leaves dx exactly as it was.
  if (layer.split_backward()) {
    for (std::size_t k = 0; k < layer.params().size(); ++k)
      from_host(be, layer.params()[k].grad, grad_start[k]);
    for (std::size_t k = 0; k < x.size(); ++k) {
      if (needs[k]) be.fill(dx[k], 1234.5f);
    }
    layer.forward(yw, xp);
    layer.backward_data(dxw, dyp, xb, yb);
    be.synchronize();
    std::vector<Vec> dx_data;
    for (std::size_t k = 0; k < x.size(); ++k) {
      if (!needs[k]) continue;
      dx_data.push_back(to_host(be, dx[k]));
      expect_close(layer.name() + " backward_data dx" + std::to_string(k), dx_data.back(),
                   g.dx.at(k), dgrad_tol);
    }
    for (std::size_t k = 0; k < layer.params().size(); ++k) {
      EXPECT_EQ(to_host(be, layer.params()[k].grad), grad_start[k])
          << layer.params()[k].name << ": changed by backward_data";
    }
    layer.backward_weights(dyp, xb, yb);
    be.synchronize();
    for (std::size_t k = 0; k < layer.params().size(); ++k) {
      Vec want = g.dparams.at(k);
      for (std::size_t i = 0; i < want.size(); ++i) want[i] += grad_start[k][i];
      expect_close(layer.params()[k].name + " backward_weights (accumulated)",
                   to_host(be, layer.params()[k].grad), want, wgrad_tol);
    }
    std::size_t d = 0;
    for (std::size_t k = 0; k < x.size(); ++k) {
      if (needs[k])
        EXPECT_EQ(to_host(be, dx[k]), dx_data[d++]) << "dx" << k << ": changed by backward_weights";
    }
  }
  if (opt.run_fd && target == Target::kCpu) {
    check_reference_gradients(fwd, bwd, xh, ph, dyh, needs, opt.fd_samples);
  }
}

}  // namespace tbd::test
