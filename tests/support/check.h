// tests/support/check.h: comparing results to references, float64 finite differences, and the
// one harness that runs a layer case on each target (CPU, CUDA FP32, CUDA TF32) against a float64
// reference of the same layer, with the tolerances of tests/support/tolerances.h.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "backends/backends.h"
#include "core/backend.h"
#include "layers/layer.h"
#include "tests/support/tolerances.h"

namespace tbd::test {

using Vec = std::vector<double>;

// EXPECTs |got - ref| <= atol + rtol*|ref| elementwise; on failure prints the first mismatches
// and the max absolute/relative error. Returns whether it passed.
bool expect_close(const std::string& what, const Vec& got, const Vec& ref, Tol tol);

// Reference of a layer in float64: outputs from inputs and parameters.
using RefForward =
    std::function<std::vector<Vec>(const std::vector<Vec>& x, const std::vector<Vec>& params)>;
struct RefGrads {
  std::vector<Vec> dx;       // one per input (empty Vec: no gradient)
  std::vector<Vec> dparams;  // one per parameter
};
using RefBackward = std::function<RefGrads(
    const std::vector<Vec>& x, const std::vector<Vec>& params, const std::vector<Vec>& dy)>;

// Checks ref_backward against central finite differences of L = sum_k <y_k, dy_k> computed
// with ref_forward, on up to `samples` random coordinates of each differentiable input and
// each parameter.
void check_reference_gradients(const RefForward& fwd, const RefBackward& bwd,
                               const std::vector<Vec>& x, const std::vector<Vec>& params,
                               const std::vector<Vec>& dy, const std::vector<bool>& x_needs_grad,
                               int samples = 24, Tol tol = kFiniteDiff);

struct LayerCheckOptions {
  // Picks the tolerances of every phase from tests/support/tolerances.h, with the target the
  // backend is (its kind and math mode).
  OpClass op_class = OpClass::kPlain;
  // Per input: whether it gets a gradient (default: all f32 inputs do).
  std::vector<bool> x_needs_grad;
  // Value range of random f32 inputs and of i32 and u8 inputs ([lo, hi)).
  double x_lo = -1.0, x_hi = 1.0;
  int64_t int_lo = 0, int_hi = 2;
  // Fixed values of some inputs, by index (labels with ignored rows, ids), instead of random.
  std::map<int, Vec> x_values;
  // Parameters: random uniform in [-p, p] (instead of the layer's own init) so every element
  // matters.
  double p_range = 0.5;
  bool training = true;
  uint64_t seed = 1;
  int fd_samples = 24;
  // Finite differences of the reference; they run on the CPU target only (the reference does
  // not depend on the target, so once per case is enough).
  bool run_fd = true;
};

// Builds `layer` (already constructed for its input descs), runs forward and backward with
// random inputs and output gradients, compares y, dx and the parameter gradients (which must
// accumulate onto a non-zero start) with the reference within the tolerances of the target
// `be` is, checks that neither allocates, and finite-difference checks the reference.
void check_layer(Backend& be, Layer& layer, const RefForward& fwd, const RefBackward& bwd,
                 const LayerCheckOptions& opt = {});

// ---- targets: every layer suite runs each case on each of them ----

const char* to_string(Target t);
// The target a backend is now: its kind and math mode.
Target target_of(const Backend& be);
// The backend of target `t`, in the target's math mode, shared by every test of the process
// (a CUDA context and its library handles take about a second to create; released before the
// process exits, while the CUDA runtime is still up); nullptr, with the reason in `why`, where
// the target cannot run (no CUDA device here and in CI: those tests skip with it).
Backend* target_backend(Target t, std::string* why);

// Inputs as `be`'s implementation of the kind takes them. The CPU cases pin layouts to reach
// oneDNN's blocked paths; elsewhere each input comes in the layout the implementation wants,
// as a graph would reorder it to (CUDA's want row-major).
template <class Config>
std::vector<TensorDesc> inputs_for(Backend& be, const std::string& name, const Config& cfg,
                                   std::vector<TensorDesc> in) {
  if (be.kind() == DeviceKind::kCpu) return in;
  const std::vector<Layout> want = wanted_layouts(be.kind(), name, cfg, in);
  for (std::size_t k = 0; k < in.size(); ++k) in[k].layout = want[k];
  return in;
}

// Expects `other` to have the contract `cpu` has: output shapes and dtypes, parameter names,
// shapes, init and decay, FLOPs and bytes per phase (all stated once per kind).
void expect_same_contract(const Layer& cpu, const Layer& other);

// A standalone layer of Config's kind on `be` (inputs as inputs_for gives them). Off the CPU it
// also builds the CPU layer for the same inputs and expects the same contract.
template <class Config>
std::unique_ptr<Layer> make_target_layer(Backend& be, const std::string& name, const Config& cfg,
                                         const std::vector<TensorDesc>& in) {
  std::unique_ptr<Layer> layer = make_layer(be, name, cfg, inputs_for(be, name, cfg, in));
  if (be.kind() != DeviceKind::kCpu) {
    std::string why;
    Backend* cpu = target_backend(Target::kCpu, &why);
    if (cpu) expect_same_contract(*make_layer(*cpu, name, cfg, in), *layer);
  }
  return layer;
}

// Sets `be_` (a Backend*) to the backend of target `t`, or skips the test with the reason.
#define TBD_USE_TARGET(be_, t)                                                     \
  do {                                                                             \
    std::string why_;                                                              \
    be_ = ::tbd::test::target_backend(t, &why_);                                   \
    if (be_ == nullptr) GTEST_SKIP() << ::tbd::test::to_string(t) << ": " << why_; \
  } while (0)

// Skips the current test where backend `be` has no implementation of Config's kind (yet).
#define TBD_SKIP_WITHOUT_IMPLEMENTATION(Config, be)                 \
  do {                                                              \
    if (!::tbd::layer_registry<Config>().count((be).kind())) {      \
      GTEST_SKIP() << Config::kKind << " has no implementation on " \
                   << ::tbd::to_string((be).kind());                \
    }                                                               \
  } while (0)

// The fixture of a layer suite: parameter (case, target), the case having a `name`.
template <class Case>
class LayerTest : public ::testing::TestWithParam<std::tuple<Case, Target>> {
 protected:
  void SetUp() override { TBD_USE_TARGET(be_, target()); }
  const Case& tcase() const { return std::get<0>(this->GetParam()); }
  Target target() const { return std::get<1>(this->GetParam()); }
  Backend& be() const { return *be_; }
  template <class Config>
  std::unique_ptr<Layer> make(const std::string& name, const Config& cfg,
                              const std::vector<TensorDesc>& in) const {
    return make_target_layer(*be_, name, cfg, in);
  }
  Backend* be_ = nullptr;
};

// The fixture of a single-case test run on every target: parameter the target.
class TargetTest : public ::testing::TestWithParam<Target> {
 protected:
  void SetUp() override { TBD_USE_TARGET(be_, target()); }
  Target target() const { return GetParam(); }
  Backend& be() const { return *be_; }
  template <class Config>
  std::unique_ptr<Layer> make(const std::string& name, const Config& cfg,
                              const std::vector<TensorDesc>& in) const {
    return make_target_layer(*be_, name, cfg, in);
  }
  Backend* be_ = nullptr;
};

// INSTANTIATE_TEST_SUITE_P(Shapes, Suite, on_all_targets(::testing::Values(cases...)),
//                          CaseOnTarget()): every case on every target, named <case>_<target>.
template <class Cases>
auto on_all_targets(const Cases& cases) {
  return ::testing::Combine(cases, ::testing::ValuesIn(kAllTargets));
}
struct CaseOnTarget {
  template <class P>
  std::string operator()(const ::testing::TestParamInfo<P>& info) const {
    return std::get<0>(info.param).name + "_" + to_string(std::get<1>(info.param));
  }
};
// For TargetTest: INSTANTIATE_TEST_SUITE_P(Targets, Suite, ::testing::ValuesIn(kAllTargets),
//                                          TargetName()).
struct TargetName {
  std::string operator()(const ::testing::TestParamInfo<Target>& info) const {
    return to_string(info.param);
  }
};

// Expects f() to throw tbd::Error whose message contains every one of `parts` (the layer
// kind and name, the argument, the dims...).
void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts);

// Skips the current test, with the reason, where no CUDA device is usable (no GPU here and in
// CI: the CUDA tests compile everywhere and run where a device is lent).
#define TBD_SKIP_WITHOUT_CUDA()                           \
  do {                                                    \
    std::string why_;                                     \
    if (!::tbd::cuda_usable(&why_)) GTEST_SKIP() << why_; \
  } while (0)

// Host <-> tensor helpers in float64 (plain layout on the host).
Vec to_host(Backend& be, const Tensor& t);
void from_host(Backend& be, const Tensor& t, const Vec& v);
Vec random_vec(int64_t n, uint64_t seed, double lo = -1.0, double hi = 1.0);

// Runs layer.forward once on inputs holding `values` (one Vec per input, plain order) and
// returns the outputs' values; for cases worked out by hand and for the checks that forward
// makes on values (an out-of-range length must throw).
std::vector<Vec> forward_values(Backend& be, Layer& layer, const std::vector<Vec>& values);

}  // namespace tbd::test
