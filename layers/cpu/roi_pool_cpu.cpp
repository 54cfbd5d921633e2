// layers/cpu/roi_pool_cpu.cpp: RoIPool (max and align), own loops, OpenMP over (RoI, channel
// chunk) in forward and over channel chunks in backward.
//
// x and y share x's layout: nChw16c (the convolutions' layout, in which the detector's
// backbone hands over its feature map and in which the head's next convolution wants the
// pooled RoIs; wanted whenever C % 16 == 0) or row-major. In nChw16c the 16 channels of a
// block sit next to each other, so every cell of a bin is one 16-wide vector (a max or an FMA
// per cell, the bin's geometry and bilinear weights shared by the lanes); row-major walks each
// channel's plane, one channel at a time. Measured at the model's size in results/tuning.md.
//
// Backward gives each task whole channels of dx (zeroed, then every RoI's contributions added
// in RoI order): no two threads write the same element, no atomics, and dx is the same from
// run to run whatever the thread count.
#include <omp.h>

#include <algorithm>
#include <cfloat>
#include <cstring>

#include "layers/cpu/simd.h"
#include "layers/roi_pool.h"

namespace tbd::cpu {
namespace {

constexpr int64_t kFwdChunk = 64;  // channels per forward task (bins' weights shared by them)
// Channels of dx per backward task: up to 64 (the samples' geometry is shared by them), down to
// 16 so that every thread gets about 4 tasks.
int64_t backward_chunk(int64_t C) {
  const int64_t per = C / (4 * omp_get_max_threads()) / 16 * 16;
  return std::clamp<int64_t>(per, 16, 64);
}

struct RoIArgs {
  const float* x;     // (N, C, H, W) in blocks of B channels
  const float* rois;  // (R, 5)
  float* y;           // forward: (R, C, PH, PW) in blocks of B channels
  int32_t* arg;       // (R, C, PH, PW) argmax (kMax)
  const float* dy;    // backward: (R, C, PH, PW) in blocks of B
  float* dx;          // backward: (N, C, H, W) in blocks of B
  int64_t N, C, H, W, PH, PW, sampling_ratio;
  float scale;
};

// The image a RoI row points at, or -1 when its batch index is outside [0, N) (or NaN).
inline int64_t roi_batch(const float* roi, int64_t N) {
  const float b = roi[0];
  return b >= 0.0f && b < static_cast<float>(N) ? static_cast<int64_t>(b) : -1;
}

// One block of 16 channels as one vector (GCC vector extensions: a zmm register in the
// AVX-512 clone, two ymm in the AVX2 one). The max pool's running maximum and argmax stay in
// registers; written with `#pragma omp simd` over 16 lanes instead, GCC 12 kept them in memory
// and branched around the selects (the model's forward 30 ms against 12: results/tuning.md).
using F16 = float __attribute__((vector_size(64)));
using I16 = int32_t __attribute__((vector_size(64)));

// The maximum over cells [hs, he) x [ws, we) of a plane of B channels, and its cell (first in
// (h, w) order; -FLT_MAX and -1 when no cell is larger).
template <int B>
[[gnu::always_inline]] inline void bin_max(const float* xp, int64_t W, int64_t hs, int64_t he,
                                           int64_t ws, int64_t we, float* m_out, int32_t* a_out) {
  if constexpr (B == 16) {
    F16 m = F16{} - FLT_MAX;
    I16 am = I16{} - 1;
    for (int64_t h = hs; h < he; ++h) {
      for (int64_t w = ws; w < we; ++w) {
        const auto idx = static_cast<int32_t>(h * W + w);
        F16 v;
        std::memcpy(&v, xp + idx * 16, sizeof v);
        const I16 gt = v > m;
        m = gt ? v : m;
        am = gt ? I16{} + idx : am;
      }
    }
    std::memcpy(m_out, &m, sizeof m);
    std::memcpy(a_out, &am, sizeof am);
  } else {
    float m = -FLT_MAX;
    int32_t am = -1;
    for (int64_t h = hs; h < he; ++h) {
      for (int64_t w = ws; w < we; ++w) {
        const auto idx = static_cast<int32_t>(h * W + w);
        const float v = xp[idx];
        const bool gt = v > m;  // selects, not a branch: the comparisons are unpredictable
        am = gt ? idx : am;
        m = gt ? v : m;
      }
    }
    *m_out = m;
    *a_out = am;
  }
}

// Calls f(p, hs, he, ws, we) for every bin p = ph * PW + pw of a max-pooled RoI: its cells
// [hs, he) x [ws, we).
template <class F>
[[gnu::always_inline]] inline void each_max_bin(const RoIArgs& a, const RoIMaxBox& box, F&& f) {
  for (int64_t ph = 0; ph < a.PH; ++ph) {
    int64_t hs, he;
    roi_max_bin(box.y, ph, a.H, &hs, &he);
    for (int64_t pw = 0; pw < a.PW; ++pw) {
      int64_t ws, we;
      roi_max_bin(box.x, pw, a.W, &ws, &we);
      f(ph * a.PW + pw, hs, he, ws, we);
    }
  }
}

// Forward of RoI r over channels [c0, c1) (multiples of B, but c1 may be C).
template <int B>
[[gnu::always_inline]] inline void max_forward(const RoIArgs& a, int64_t r, int64_t c0,
                                               int64_t c1) {
  const float* roi = a.rois + r * 5;
  const int64_t n = roi_batch(roi, a.N);
  const RoIMaxBox box = roi_max_box(roi, a.scale, a.PH, a.PW);
  const int64_t CB = a.C / B, HW = a.H * a.W, PHW = a.PH * a.PW;
  // Bins outer, blocks of B channels inner (measured faster than a block at a time, both
  // layouts: results/tuning.md).
  each_max_bin(a, box, [&](int64_t p, int64_t hs, int64_t he, int64_t ws, int64_t we) {
    for (int64_t cb = c0 / B; cb < c1 / B; ++cb) {
      const int64_t o = ((r * CB + cb) * PHW + p) * B;
      if (he <= hs || we <= ws) {
        for (int l = 0; l < B; ++l) a.y[o + l] = 0.0f, a.arg[o + l] = -1;
      } else {
        bin_max<B>(a.x + (n * CB + cb) * HW * B, a.W, hs, he, ws, we, a.y + o, a.arg + o);
      }
    }
  });
}

template <int B>
[[gnu::always_inline]] inline void align_forward(const RoIArgs& a, int64_t r, int64_t c0,
                                                 int64_t c1) {
  const float* roi = a.rois + r * 5;
  const int64_t n = roi_batch(roi, a.N);
  const RoIAlignBox box = roi_align_box(roi, a.scale, a.PH, a.PW, a.sampling_ratio);
  const int64_t CB = a.C / B, HW = a.H * a.W, PHW = a.PH * a.PW;
  for (int64_t ph = 0; ph < a.PH; ++ph) {
    for (int64_t pw = 0; pw < a.PW; ++pw) {
      float acc[kFwdChunk];
      for (int64_t k = 0; k < c1 - c0; ++k) acc[k] = 0.0f;
      roi_align_samples(box, ph, pw, a.H, a.W, [&](const int64_t* cell, const float* wt) {
        const int64_t p1 = cell[0] * B, p2 = cell[1] * B, p3 = cell[2] * B, p4 = cell[3] * B;
        for (int64_t cb = c0 / B; cb < c1 / B; ++cb) {
          const float* xp = a.x + (n * CB + cb) * HW * B;
          float* ac = acc + (cb * B - c0);
#pragma omp simd
          for (int l = 0; l < B; ++l) {
            ac[l] +=
                wt[0] * xp[p1 + l] + wt[1] * xp[p2 + l] + wt[2] * xp[p3 + l] + wt[3] * xp[p4 + l];
          }
        }
      });
      for (int64_t cb = c0 / B; cb < c1 / B; ++cb) {
        const int64_t o = ((r * CB + cb) * PHW + ph * a.PW + pw) * B;
        const float* ac = acc + (cb * B - c0);
        for (int l = 0; l < B; ++l) a.y[o + l] = ac[l] / box.count;
      }
    }
  }
}

// Backward of channels [c0, c1) (whole blocks of B): dx zeroed there, then every RoI's
// contributions in RoI order.
template <int B>
[[gnu::always_inline]] inline void max_backward(const RoIArgs& a, int64_t R, int64_t c0,
                                                int64_t c1) {
  const int64_t CB = a.C / B, HW = a.H * a.W, PHW = a.PH * a.PW;
  for (int64_t r = 0; r < R; ++r) {
    const float* roi = a.rois + r * 5;
    const int64_t n = roi_batch(roi, a.N);
    if (n < 0) continue;
    const RoIMaxBox box = roi_max_box(roi, a.scale, a.PH, a.PW);
    for (int64_t cb = c0 / B; cb < c1 / B; ++cb) {
      float* dxp = a.dx + (n * CB + cb) * HW * B;
      const int64_t o0 = (r * CB + cb) * PHW * B;
      const float* g = a.dy + o0;
      const int32_t* am = a.arg + o0;
      if constexpr (B == 16) {
        // Each lane's argmax is a cell of its bin: walk the bin's cells and add dy to the
        // lanes whose argmax it is (a compare and a masked add per cell, instead of 16
        // scalar scatters, which GCC does not vectorize).
        each_max_bin(a, box, [&](int64_t p, int64_t hs, int64_t he, int64_t ws, int64_t we) {
          F16 gv;
          I16 av;
          std::memcpy(&gv, g + p * 16, sizeof gv);
          std::memcpy(&av, am + p * 16, sizeof av);
          for (int64_t h = hs; h < he; ++h) {
            for (int64_t w = ws; w < we; ++w) {
              const auto idx = static_cast<int32_t>(h * a.W + w);
              F16 d;
              std::memcpy(&d, dxp + idx * 16, sizeof d);
              d += av == idx ? gv : F16{};
              std::memcpy(dxp + idx * 16, &d, sizeof d);
            }
          }
        });
      } else {
        for (int64_t p = 0; p < PHW; ++p) {
          if (am[p] >= 0) dxp[am[p]] += g[p];
        }
      }
    }
  }
}

template <int B>
[[gnu::always_inline]] inline void align_backward(const RoIArgs& a, int64_t R, int64_t c0,
                                                  int64_t c1) {
  const int64_t CB = a.C / B, HW = a.H * a.W, PHW = a.PH * a.PW;
  for (int64_t r = 0; r < R; ++r) {
    const float* roi = a.rois + r * 5;
    const int64_t n = roi_batch(roi, a.N);
    if (n < 0) continue;
    const RoIAlignBox box = roi_align_box(roi, a.scale, a.PH, a.PW, a.sampling_ratio);
    for (int64_t ph = 0; ph < a.PH; ++ph) {
      for (int64_t pw = 0; pw < a.PW; ++pw) {
        roi_align_samples(box, ph, pw, a.H, a.W, [&](const int64_t* cell, const float* wt) {
          const float w[4] = {wt[0] / box.count, wt[1] / box.count, wt[2] / box.count,
                              wt[3] / box.count};
          for (int64_t cb = c0 / B; cb < c1 / B; ++cb) {
            float* dxp = a.dx + (n * CB + cb) * HW * B;
            const float* g = a.dy + ((r * CB + cb) * PHW + ph * a.PW + pw) * B;
            // The taps may be the same cell (clamped at the border): one after another.
            for (int k = 0; k < 4; ++k) {
              float* d = dxp + cell[k] * B;
#pragma omp simd
              for (int l = 0; l < B; ++l) d[l] += w[k] * g[l];
            }
          }
        });
      }
    }
  }
}

// The per-task kernels, compiled for every vector width (layers/cpu/simd.h).
TBD_SIMD_CLONES void forward_b16(const RoIArgs& a, bool max, int64_t r, int64_t c0, int64_t c1) {
  max ? max_forward<16>(a, r, c0, c1) : align_forward<16>(a, r, c0, c1);
}
TBD_SIMD_CLONES void forward_b1(const RoIArgs& a, bool max, int64_t r, int64_t c0, int64_t c1) {
  max ? max_forward<1>(a, r, c0, c1) : align_forward<1>(a, r, c0, c1);
}
TBD_SIMD_CLONES void backward_b16(const RoIArgs& a, bool max, int64_t R, int64_t c0, int64_t c1) {
  max ? max_backward<16>(a, R, c0, c1) : align_backward<16>(a, R, c0, c1);
}
TBD_SIMD_CLONES void backward_b1(const RoIArgs& a, bool max, int64_t R, int64_t c0, int64_t c1) {
  max ? max_backward<1>(a, R, c0, c1) : align_backward<1>(a, R, c0, c1);
}

// dx = 0 in channels [c0, c1) of every image: (N*C + c0)*HW on, in either layout (c0 and c1 - c0
// are whole blocks of B channels, B planes' worth of floats).
void zero_dx(const RoIArgs& a, int64_t c0, int64_t c1) {
  const int64_t HW = a.H * a.W;
  for (int64_t n = 0; n < a.N; ++n) {
    std::memset(a.dx + (n * a.C + c0) * HW, 0,
                static_cast<std::size_t>((c1 - c0) * HW) * sizeof(float));
  }
}

class RoIPoolCpu final : public Layer {
 public:
  RoIPoolCpu(Backend& be, const std::string& name, const RoIPoolConfig& cfg,
             const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg) {
    const Shape& xs = in[0].shape;
    TBD_LAYER_CHECK(xs[2] * xs[3] <= INT32_MAX, kind(), name,
                    "input x's planes must hold at most 2^31 - 1 cells (the argmax is i32), got ",
                    xs.to_string());
    B_ = in[0].layout == Layout::kNChw16c ? 16 : 1;
    outputs_[0].layout = in[0].layout;
    R_ = in[1].shape[0];
    args_.N = xs[0], args_.C = xs[1], args_.H = xs[2], args_.W = xs[3];
    args_.PH = cfg.pooled_h, args_.PW = cfg.pooled_w;
    args_.sampling_ratio = cfg.sampling_ratio;
    args_.scale = static_cast<float>(cfg.spatial_scale);
    if (cfg.mode == RoIPoolMode::kMax) {
      saved(argmax_, TensorDesc{outputs_[0].shape, DType::kI32});
    }
  }
  // x in nChw16c whenever C % 16 == 0, else row-major; the boxes row-major. Blocked, a cell
  // of a bin is one 16-wide vector: at the model's size the row-major forward is ~6x slower,
  // more than reordering x (and y after it) costs (results/tuning.md).
  static std::vector<Layout> input_layouts(const RoIPoolConfig&,
                                           const std::vector<TensorDesc>& in) {
    const bool blocked = in[0].shape.rank() == 4 && in[0].shape[1] % 16 == 0;
    return {blocked ? Layout::kNChw16c : Layout::kRowMajor, Layout::kRowMajor};
  }

  // y: (R, C, PH, PW)  x: (N, C, H, W)  rois: (R, 5)
  void fprop(MutTensorRefs y, TensorRefs x) override {
    RoIArgs a = args_;
    a.x = x[0]->f32();
    a.rois = x[1]->f32();
    a.y = y[0]->f32();
    a.arg = argmax_.defined() ? argmax_.data<int32_t>() : nullptr;
    for (int64_t r = 0; r < R_; ++r) {
      TBD_LAYER_CHECK(roi_batch(a.rois + r * 5, a.N) >= 0, kind(), name_, "rois row ", r,
                      " has batch index ", a.rois[r * 5], ", outside [0, ", a.N,
                      ") (the images of x ", inputs_[0].shape.to_string(), ")");
    }
    const int64_t chunks = (a.C + kFwdChunk - 1) / kFwdChunk;
    const bool max = cfg_.mode == RoIPoolMode::kMax;
    const int B = B_;
#pragma omp parallel for schedule(dynamic, 4)
    for (int64_t t = 0; t < R_ * chunks; ++t) {
      const int64_t r = t / chunks, c0 = (t % chunks) * kFwdChunk;
      const int64_t c1 = std::min(c0 + kFwdChunk, a.C);
      B == 16 ? forward_b16(a, max, r, c0, c1) : forward_b1(a, max, r, c0, c1);
    }
  }

  // dx: (N, C, H, W)  dy: (R, C, PH, PW); the boxes get no gradient.
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs) override {
    if (dx[0] == nullptr) return;
    RoIArgs a = args_;
    a.rois = x[1]->f32();
    a.dy = dy[0]->f32();
    a.arg = argmax_.defined() ? argmax_.data<int32_t>() : nullptr;
    a.dx = dx[0]->f32();
    const int64_t chunk = backward_chunk(a.C);
    const int64_t chunks = (a.C + chunk - 1) / chunk;
    const bool max = cfg_.mode == RoIPoolMode::kMax;
    const int B = B_;
    const int64_t R = R_;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t t = 0; t < chunks; ++t) {
      const int64_t c0 = t * chunk, c1 = std::min(c0 + chunk, a.C);
      zero_dx(a, c0, c1);
      B == 16 ? backward_b16(a, max, R, c0, c1) : backward_b1(a, max, R, c0, c1);
    }
  }

 private:
  RoIPoolConfig cfg_;
  RoIArgs args_{};
  int B_ = 1;
  int64_t R_ = 0;
  Tensor argmax_;  // (R, C, PH, PW) i32, kMax only
};

TBD_REGISTER_LAYER(RoIPoolConfig, DeviceKind::kCpu, RoIPoolCpu);

}  // namespace
}  // namespace tbd::cpu
