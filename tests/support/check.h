// tests/support/check.h: comparing results to references, float64 finite differences, and a
// harness that runs one layer on a backend against a float64 reference of the same layer.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "core/backend.h"
#include "backends/backends.h"
#include "layers/layer.h"
#include "tests/support/tolerances.h"

namespace tbd::test {

using Vec = std::vector<double>;

// EXPECTs |got - ref| <= atol + rtol*|ref| elementwise; on failure prints the first mismatches
// and the max absolute/relative error. Returns whether it passed.
bool expect_close(const std::string& what, const Vec& got, const Vec& ref, Tol tol);

// Reference of a layer in float64: outputs from inputs and parameters.
using RefForward = std::function<std::vector<Vec>(const std::vector<Vec>& x,
                                                  const std::vector<Vec>& params)>;
struct RefGrads {
  std::vector<Vec> dx;       // one per input (empty Vec: no gradient)
  std::vector<Vec> dparams;  // one per parameter
};
using RefBackward = std::function<RefGrads(const std::vector<Vec>& x,
                                           const std::vector<Vec>& params,
                                           const std::vector<Vec>& dy)>;

// Checks ref_backward against central finite differences of L = sum_k <y_k, dy_k> computed
// with ref_forward, on up to `samples` random coordinates of each differentiable input and
// each parameter.
void check_reference_gradients(const RefForward& fwd, const RefBackward& bwd,
                               const std::vector<Vec>& x, const std::vector<Vec>& params,
                               const std::vector<Vec>& dy, const std::vector<bool>& x_needs_grad,
                               int samples = 24, Tol tol = kFiniteDiff);

struct LayerCheckOptions {
  Tol fwd_tol = kF32;
  Tol bwd_data_tol = kF32;
  Tol bwd_weights_tol = kF32Reduction;
  // Per input: whether it gets a gradient (default: all f32 inputs do).
  std::vector<bool> x_needs_grad;
  // Value range of random f32 inputs and of i32 inputs ([lo, hi)).
  double x_lo = -1.0, x_hi = 1.0;
  int64_t int_lo = 0, int_hi = 2;
  // Parameters: random uniform in [-p, p] (instead of the layer's own init) so every element
  // matters; set p_fixed to keep the layer's own init (e.g. batchnorm gamma = 1).
  double p_range = 0.5;
  bool training = true;
  uint64_t seed = 1;
  int fd_samples = 24;
  bool run_fd = true;
};

// Builds `layer` (already constructed for its input descs), runs forward and backward with
// random inputs and output gradients, compares y, dx and the parameter gradients (which must
// accumulate onto a non-zero start) with the reference, and finite-difference checks the
// reference. Returns the inputs it used, for follow-up checks.
void check_layer(Backend& be, Layer& layer, const RefForward& fwd, const RefBackward& bwd,
                 const LayerCheckOptions& opt = {});

// Expects f() to throw tbd::Error whose message contains every one of `parts` (the layer
// kind and name, the argument, the dims...).
void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts);

// Skips the current test, with the reason, where no CUDA device is usable (no GPU here and in
// CI: the CUDA tests compile everywhere and run where a device is lent).
#define TBD_SKIP_WITHOUT_CUDA()                                 \
  do {                                                          \
    std::string why_;                                           \
    if (!::tbd::cuda_usable(&why_)) GTEST_SKIP() << why_;       \
  } while (0)

// Host <-> tensor helpers in float64 (plain layout on the host).
Vec to_host(Backend& be, const Tensor& t);
void from_host(Backend& be, const Tensor& t, const Vec& v);
Vec random_vec(int64_t n, uint64_t seed, double lo = -1.0, double hi = 1.0);

}  // namespace tbd::test
