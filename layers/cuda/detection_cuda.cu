// layers/cuda/detection_cuda.cu: Proposal, AnchorTarget and ProposalTarget on CUDA.
//
// Proposal: one kernel decodes, clips, filters and scores every anchor (filtered ones get the
// key -inf); CUB's radix sort (stable: equal scores keep ascending anchor order, the CPU's tie
// order) sorts each image's keys descending; the top pre_nms_top_n valid boxes are gathered;
// NMS is the standard bitmask kernel (64 x 64 tiles of IoU > threshold bits, box_iou_areas of
// layers/detection.h, bit-identical to the CPU's) and a sequential reduce per image in one
// block that stops at post_nms_top_n kept and writes the rois (cyclic padding).
// AnchorTarget and ProposalTarget: one block per image. Sampling draws the same keys as the
// CPU (sample_rank) and takes the k smallest by a radix select on the 64-bit keys (64
// block-wide counts), so both backends pick the same sets. ProposalTarget's compaction of the
// picked RoIs into ascending order is sequential in one thread (a few thousand candidates).
// No step counter in device memory: the call counter is host state, as the CPU's (a captured
// graph would replay one draw).
#include <cub/device/device_radix_sort.cuh>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/kernel_util.cuh"
#include "layers/cuda/cuda_layer_util.h"
#include "layers/detection.h"

namespace tbd::cuda {
namespace {

constexpr int kNmsTile = 64;
constexpr int kImageBlock = 1024;

// ---- Proposal ----

__global__ void proposal_decode_kernel(const float* __restrict__ cls, const float* __restrict__ del,
                                       const float* __restrict__ anchors, int64_t N, int64_t A,
                                       int64_t HW, float im_h, float im_w, float min_size,
                                       float* __restrict__ boxes, float* __restrict__ keys,
                                       int32_t* __restrict__ idx) {
  const int64_t K = A * HW;
  TBD_GRID_STRIDE(nk, N * K) {
    const int64_t n = nk / K, k = nk % K, a = k / HW, hw = k % HW;
    float d[4];
    for (int j = 0; j < 4; ++j) d[j] = del[((n * 4 * A) + 4 * a + j) * HW + hw];
    float b[4];
    bbox_decode(anchors + k * 4, d, b);
    bbox_clip(b, im_h, im_w);
    for (int j = 0; j < 4; ++j) boxes[nk * 4 + j] = b[j];
    const bool valid = (b[2] - b[0] + 1.f) >= min_size && (b[3] - b[1] + 1.f) >= min_size;
    const float score = __fadd_rn(
        __fsub_rn(cls[(n * 2 * A + A + a) * HW + hw], cls[(n * 2 * A + a) * HW + hw]), 0.f);
    keys[nk] = valid ? score : -INFINITY;
    idx[nk] = static_cast<int32_t>(k);
  }
}

// The sorted top `pre` boxes of each image (N, pre, 4) with their areas, and each image's
// count of valid ones among them (the position of the first -inf key, capped at pre).
__global__ void proposal_gather_kernel(const float* __restrict__ boxes,
                                       const float* __restrict__ sorted_keys,
                                       const int32_t* __restrict__ sorted_idx, int64_t N, int64_t K,
                                       int64_t pre, float* __restrict__ top,
                                       float* __restrict__ area, int32_t* __restrict__ count) {
  TBD_GRID_STRIDE(ni, N * pre) {
    const int64_t n = ni / pre, i = ni % pre;
    const float key = sorted_keys[n * K + i];
    const bool valid = key != -INFINITY;
    const bool last = valid && (i + 1 == pre || sorted_keys[n * K + i + 1] == -INFINITY);
    if (i == 0 && !valid) count[n] = 0;
    if (last) count[n] = static_cast<int32_t>(i + 1);
    if (!valid) continue;
    const float* b = boxes + (n * K + sorted_idx[n * K + i]) * 4;
    for (int j = 0; j < 4; ++j) top[ni * 4 + j] = b[j];
    area[ni] = box_area(b);
  }
}

// mask[n][i][c]: bit t set when IoU(box i, box 64 c + t) > threshold, for 64 c + t > i.
__global__ void nms_mask_kernel(const float* __restrict__ top, const float* __restrict__ area,
                                const int32_t* __restrict__ count, int64_t pre, int64_t blocks,
                                float threshold, unsigned long long* __restrict__ mask) {
  const int64_t n = blockIdx.z, rb = blockIdx.y, cb = blockIdx.x;
  const int64_t cnt = count[n];
  if (cb < rb || rb * kNmsTile >= cnt) return;
  const int64_t rows = min(cnt - rb * kNmsTile, int64_t{kNmsTile});
  const int64_t cols = min(cnt - cb * kNmsTile, int64_t{kNmsTile});
  if (cols <= 0) return;
  __shared__ float cb_box[kNmsTile * 4];
  __shared__ float cb_area[kNmsTile];
  const int t = threadIdx.x;
  const float* base = top + n * pre * 4;
  if (t < cols) {
    for (int j = 0; j < 4; ++j) cb_box[t * 4 + j] = base[(cb * kNmsTile + t) * 4 + j];
    cb_area[t] = area[n * pre + cb * kNmsTile + t];
  }
  __syncthreads();
  if (t >= rows) return;
  const int64_t i = rb * kNmsTile + t;
  const float* bi = base + i * 4;
  const float ai = area[n * pre + i];
  unsigned long long bits = 0;
  for (int64_t c = (rb == cb ? t + 1 : 0); c < cols; ++c) {
    if (box_iou_areas(bi, ai, cb_box + c * 4, cb_area[c]) > threshold) bits |= 1ull << c;
  }
  mask[(n * pre + i) * blocks + cb] = bits;
}

// One block per image: the greedy pass over the mask (removed bits in shared memory), then the
// rows of the image, padded cyclically.
__global__ void nms_reduce_kernel(const float* __restrict__ top, const int32_t* __restrict__ count,
                                  const unsigned long long* __restrict__ mask, int64_t pre,
                                  int64_t blocks, int64_t post, int32_t* __restrict__ keep,
                                  float* __restrict__ rois) {
  extern __shared__ unsigned long long removed[];
  __shared__ int32_t kept_s;
  const int64_t n = blockIdx.x;
  const int64_t cnt = count[n];
  for (int64_t c = threadIdx.x; c < blocks; c += blockDim.x) removed[c] = 0;
  if (threadIdx.x == 0) kept_s = 0;
  __syncthreads();
  int32_t kept = 0;
  int32_t* kp = keep + n * post;
  for (int64_t i = 0; i < cnt && kept < post; ++i) {
    const bool gone = (removed[i / kNmsTile] >> (i % kNmsTile)) & 1ull;
    __syncthreads();  // every thread has read the bit before any OR below changes the word
    if (gone) continue;
    if (threadIdx.x == 0) kp[kept] = static_cast<int32_t>(i);
    ++kept;
    const unsigned long long* row = mask + (n * pre + i) * blocks;
    for (int64_t c = i / kNmsTile + threadIdx.x; c < blocks; c += blockDim.x) removed[c] |= row[c];
    __syncthreads();
  }
  if (threadIdx.x == 0) kept_s = kept;
  __syncthreads();
  kept = kept_s;
  const float* base = top + n * pre * 4;
  for (int64_t r = threadIdx.x; r < post; r += blockDim.x) {
    float* o = rois + (n * post + r) * 5;
    o[0] = static_cast<float>(n);
    if (kept == 0) {
      o[1] = o[2] = o[3] = o[4] = 0.f;
      continue;
    }
    const float* b = base + static_cast<int64_t>(kp[r % kept]) * 4;
    for (int j = 0; j < 4; ++j) o[1 + j] = b[j];
  }
}

class ProposalCuda final : public Layer {
 public:
  ProposalCuda(Backend& be, const std::string& name, const ProposalConfig& cfg,
               const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg), cu_(as_cuda(be)) {
    check_row_major(kind(), name, "cls", in[0]);
    check_row_major(kind(), name, "deltas", in[1]);
    N_ = in[0].shape[0];
    A_ = cfg.anchors.num_anchors();
    HW_ = cfg.anchors.feature_h * cfg.anchors.feature_w;
    K_ = A_ * HW_;
    pre_ = std::min(cfg.pre_nms_top_n, K_);
    post_ = cfg.post_nms_top_n;
    blocks_ = (pre_ + kNmsTile - 1) / kNmsTile;
    const std::vector<float> anchors = anchor_grid(cfg.anchors);
    anchors_ = be.empty(Shape{K_, 4}, MemCategory::kWorkspace);
    be.copy_from_host(anchors_, anchors.data());
    auto i32 = [&](int64_t n) {
      return be.empty(Shape{n}, MemCategory::kWorkspace, Layout::kRowMajor, DType::kI32);
    };
    boxes_ = be.empty(Shape{N_ * K_, 4}, MemCategory::kWorkspace);
    keys_ = be.empty(Shape{N_ * K_}, MemCategory::kWorkspace);
    sorted_keys_ = be.empty(Shape{N_ * K_}, MemCategory::kWorkspace);
    idx_ = i32(N_ * K_);
    sorted_idx_ = i32(N_ * K_);
    top_ = be.empty(Shape{N_ * pre_, 4}, MemCategory::kWorkspace);
    area_ = be.empty(Shape{N_ * pre_}, MemCategory::kWorkspace);
    count_ = i32(N_);
    keep_ = i32(N_ * post_);
    mask_ = i32(N_ * pre_ * blocks_ * 2);  // u64 words
    std::size_t temp = 0;
    TBD_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(
        nullptr, temp, keys_.f32(), sorted_keys_.f32(), idx_.data<int32_t>(),
        sorted_idx_.data<int32_t>(), static_cast<int>(K_), 0, 32, cu_.stream()));
    temp_ = i32(static_cast<int64_t>((temp + 3) / 4 + 1));
    temp_bytes_ = temp;
  }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    const cudaStream_t s = cu_.stream();
    proposal_decode_kernel<<<grid_for(N_ * K_), kBlock, 0, s>>>(
        x[0]->f32(), x[1]->f32(), anchors_.f32(), N_, A_, HW_,
        static_cast<float>(cfg_.anchors.image_h), static_cast<float>(cfg_.anchors.image_w),
        static_cast<float>(cfg_.min_size), boxes_.f32(), keys_.f32(), idx_.data<int32_t>());
    TBD_CUDA_CHECK_LAST();
    for (int64_t n = 0; n < N_; ++n) {
      std::size_t temp = temp_bytes_;
      TBD_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(
          temp_.raw(), temp, keys_.f32() + n * K_, sorted_keys_.f32() + n * K_,
          idx_.data<int32_t>() + n * K_, sorted_idx_.data<int32_t>() + n * K_, static_cast<int>(K_),
          0, 32, s));
    }
    proposal_gather_kernel<<<grid_for(N_ * pre_), kBlock, 0, s>>>(
        boxes_.f32(), sorted_keys_.f32(), sorted_idx_.data<int32_t>(), N_, K_, pre_, top_.f32(),
        area_.f32(), count_.data<int32_t>());
    TBD_CUDA_CHECK_LAST();
    auto* mask = static_cast<unsigned long long*>(mask_.raw());
    const dim3 grid(static_cast<unsigned>(blocks_), static_cast<unsigned>(blocks_),
                    static_cast<unsigned>(N_));
    nms_mask_kernel<<<grid, kNmsTile, 0, s>>>(top_.f32(), area_.f32(), count_.data<int32_t>(), pre_,
                                              blocks_, static_cast<float>(cfg_.nms_threshold),
                                              mask);
    TBD_CUDA_CHECK_LAST();
    nms_reduce_kernel<<<static_cast<unsigned>(N_), kBlock,
                        static_cast<std::size_t>(blocks_) * sizeof(unsigned long long), s>>>(
        top_.f32(), count_.data<int32_t>(), mask, pre_, blocks_, post_, keep_.data<int32_t>(),
        y[0]->f32());
    TBD_CUDA_CHECK_LAST();
  }

  void bprop(MutTensorRefs, TensorRefs, TensorRefs, TensorRefs) override {}

 private:
  ProposalConfig cfg_;
  CudaBackend& cu_;
  int64_t N_ = 0, A_ = 0, HW_ = 0, K_ = 0, pre_ = 0, post_ = 0, blocks_ = 0;
  Tensor anchors_, boxes_, keys_, sorted_keys_, idx_, sorted_idx_, top_, area_, count_, keep_,
      mask_, temp_;
  std::size_t temp_bytes_ = 0;
};

TBD_REGISTER_LAYER(ProposalConfig, DeviceKind::kCuda, ProposalCuda);

// ---- sampling helpers (one block) ----

__device__ int64_t block_count(int64_t v, int64_t* shared) { return block_sum(v, shared); }

// The k-th smallest sample_rank(base, i) over the i in [0, n) with pick(i) (k >= 1, at most
// the number picked): bit by bit from the top, 64 block-wide counts.
template <class Pick>
__device__ uint64_t kth_smallest_rank(const Pick& pick, int64_t n, uint64_t base, int64_t k,
                                      int64_t* shared) {
  uint64_t t = 0;
  for (int b = 63; b >= 0; --b) {
    const uint64_t probe = t | ((uint64_t{1} << b) - 1);
    int64_t c = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      c += pick(i) && sample_rank(base, i) <= probe;
    }
    if (block_count(c, shared) < k) t |= uint64_t{1} << b;
  }
  return t;
}

// The real gt rows (class >= 0) of an image's (G, 5) block into rows[], by thread 0.
__device__ int real_gt_rows(const float* gt, int64_t G, int* rows, int* count) {
  if (threadIdx.x == 0) {
    int c = 0;
    for (int64_t g = 0; g < G; ++g) {
      if (gt[g * 5 + 4] >= 0.f) rows[c++] = static_cast<int>(g);
    }
    *count = c;
  }
  __syncthreads();
  return *count;
}

// ---- AnchorTarget ----

struct AnchorTargetArgs {
  const float* gt;
  const float* anchors;
  int64_t G, K, HW, batch_size, max_fg;
  float image_h, image_w, positive_iou, negative_iou;
  uint64_t key, call;
  int32_t* labels;
  int32_t* argmax;
  float* targets;
  float* weights;
};

__device__ bool inside_image(const float* a, float im_h, float im_w) {
  return a[0] >= 0.f && a[1] >= 0.f && a[2] < im_w && a[3] < im_h;
}

__global__ void __launch_bounds__(kImageBlock) anchor_target_kernel(AnchorTargetArgs p) {
  extern __shared__ int shared_rows[];  // G rows, then G maxima (float bits)
  __shared__ int64_t red[32];
  __shared__ int g_real_s;
  const int64_t n = blockIdx.x, K = p.K;
  const float* gt = p.gt + n * p.G * 5;
  int32_t* labels = p.labels + n * K;
  int32_t* argmax = p.argmax + n * K;
  int* rows = shared_rows;
  int* gt_max = shared_rows + p.G;  // non-negative floats: int order is float order
  const int g_real = real_gt_rows(gt, p.G, rows, &g_real_s);
  for (int g = threadIdx.x; g < g_real; g += blockDim.x) gt_max[g] = 0;
  __syncthreads();
  for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
    const float* a = p.anchors + k * 4;
    if (!inside_image(a, p.image_h, p.image_w)) continue;
    const float area_a = box_area(a);
    for (int g = 0; g < g_real; ++g) {
      const float* b = gt + rows[g] * 5;
      atomicMax(&gt_max[g], __float_as_int(box_iou_areas(a, area_a, b, box_area(b))));
    }
  }
  __syncthreads();
  int64_t n_fg = 0, n_bg = 0;
  for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
    const float* a = p.anchors + k * 4;
    int32_t label = -1, arg = -1;
    if (inside_image(a, p.image_h, p.image_w)) {
      const float area_a = box_area(a);
      float best = -1.f;
      bool best_of_gt = false;
      for (int g = 0; g < g_real; ++g) {
        const float* b = gt + rows[g] * 5;
        const float iou = box_iou_areas(a, area_a, b, box_area(b));
        if (iou > best) {
          best = iou;
          arg = rows[g];
        }
        const float m = __int_as_float(gt_max[g]);
        best_of_gt |= m > 0.f && iou == m;
      }
      if (g_real == 0 || best < p.negative_iou) label = 0;
      if (g_real > 0 && (best_of_gt || best >= p.positive_iou)) label = 1;
    }
    labels[k] = label;
    argmax[k] = arg;
    n_fg += label == 1;
    n_bg += label == 0;
  }
  __syncthreads();
  n_fg = block_count(n_fg, red);
  n_bg = block_count(n_bg, red);
  if (n_fg > p.max_fg) {
    const uint64_t base = sample_base(p.key, p.call, n, 0);
    int64_t kept = 0;
    if (p.max_fg > 0) {
      const uint64_t t =
          kth_smallest_rank([&](int64_t k) { return labels[k] == 1; }, K, base, p.max_fg, red);
      __syncthreads();
      for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
        if (labels[k] == 1 && sample_rank(base, k) > t) labels[k] = -1;
      }
      kept = p.max_fg;
    } else {
      for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
        if (labels[k] == 1) labels[k] = -1;
      }
    }
    n_fg = kept;
    __syncthreads();
  }
  const int64_t max_bg = p.batch_size - n_fg;
  if (n_bg > max_bg) {
    const uint64_t base = sample_base(p.key, p.call, n, 1);
    if (max_bg > 0) {
      const uint64_t t =
          kth_smallest_rank([&](int64_t k) { return labels[k] == 0; }, K, base, max_bg, red);
      __syncthreads();
      for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
        if (labels[k] == 0 && sample_rank(base, k) > t) labels[k] = -1;
      }
    } else {
      for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
        if (labels[k] == 0) labels[k] = -1;
      }
    }
    __syncthreads();
  }
  float* targets = p.targets + n * 4 * K;
  float* weights = p.weights + n * 4 * K;
  for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
    const int64_t a = k / p.HW, hw = k % p.HW;
    float d[4] = {0.f, 0.f, 0.f, 0.f};
    const bool fg = labels[k] == 1;
    if (fg) bbox_encode(p.anchors + k * 4, gt + argmax[k] * 5, d);
    for (int j = 0; j < 4; ++j) {
      targets[(4 * a + j) * p.HW + hw] = d[j];
      weights[(4 * a + j) * p.HW + hw] = fg ? 1.f : 0.f;
    }
  }
}

class AnchorTargetCuda final : public Layer {
 public:
  AnchorTargetCuda(Backend& be, const std::string& name, const AnchorTargetConfig& cfg,
                   const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg), cu_(as_cuda(be)) {
    check_row_major(kind(), name, "gt", in[0]);
    N_ = in[0].shape[0];
    G_ = in[0].shape[1];
    HW_ = cfg.anchors.feature_h * cfg.anchors.feature_w;
    K_ = cfg.anchors.num_anchors() * HW_;
    const std::vector<float> anchors = anchor_grid(cfg.anchors);
    anchors_ = be.empty(Shape{K_, 4}, MemCategory::kWorkspace);
    be.copy_from_host(anchors_, anchors.data());
    argmax_ = be.empty(Shape{N_ * K_}, MemCategory::kWorkspace, Layout::kRowMajor, DType::kI32);
    key_ = detection_key(cfg.seed, name);
    const std::size_t shared = 2 * static_cast<std::size_t>(G_) * sizeof(int);
    TBD_LAYER_CHECK(shared <= 48 * 1024, kind(), name, "gt (", N_, ", ", G_,
                    ", 5): at most 6144 gt rows per image on the CUDA backend");
  }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    AnchorTargetArgs p{};
    p.gt = x[0]->f32();
    p.anchors = anchors_.f32();
    p.G = G_;
    p.K = K_;
    p.HW = HW_;
    p.batch_size = cfg_.batch_size;
    p.max_fg =
        static_cast<int64_t>(std::floor(cfg_.fg_fraction * static_cast<double>(cfg_.batch_size)));
    p.image_h = static_cast<float>(cfg_.anchors.image_h);
    p.image_w = static_cast<float>(cfg_.anchors.image_w);
    p.positive_iou = static_cast<float>(cfg_.positive_iou);
    p.negative_iou = static_cast<float>(cfg_.negative_iou);
    p.key = key_;
    p.call = next_call_index();
    p.labels = y[0]->data<int32_t>();
    p.argmax = argmax_.data<int32_t>();
    p.targets = y[1]->f32();
    p.weights = y[2]->f32();
    anchor_target_kernel<<<static_cast<unsigned>(N_), kImageBlock,
                           2 * static_cast<std::size_t>(G_) * sizeof(int), cu_.stream()>>>(p);
    TBD_CUDA_CHECK_LAST();
  }

  void bprop(MutTensorRefs, TensorRefs, TensorRefs, TensorRefs) override {}

 private:
  AnchorTargetConfig cfg_;
  CudaBackend& cu_;
  int64_t N_ = 0, G_ = 0, HW_ = 0, K_ = 0;
  uint64_t key_ = 0;
  Tensor anchors_, argmax_;
};

TBD_REGISTER_LAYER(AnchorTargetConfig, DeviceKind::kCuda, AnchorTargetCuda);

// ---- ProposalTarget ----

struct ProposalTargetArgs {
  const float* rois;
  const float* gt;
  int64_t P, G, R, C, fg_per_image;
  float fg_iou, bg_hi, bg_lo;
  float stds[4];
  uint64_t key, call;
  float* best;
  int32_t* assign;
  int32_t* keep;
  float* out_rois;
  int32_t* labels;
  float* targets;
  float* weights;
};

__device__ const float* candidate_box(const ProposalTargetArgs& p, const float* rois,
                                      const float* gt, const int* rows, int64_t i) {
  return i < p.P ? rois + i * 5 + 1 : gt + rows[i - p.P] * 5;
}

__global__ void __launch_bounds__(kImageBlock) proposal_target_kernel(ProposalTargetArgs p) {
  extern __shared__ int shared_rows[];
  __shared__ int64_t red[32];
  __shared__ int g_real_s;
  const int64_t n = blockIdx.x, M_max = p.P + p.G;
  const float* rois = p.rois + n * p.P * 5;
  const float* gt = p.gt + n * p.G * 5;
  float* best = p.best + n * M_max;
  int32_t* assign = p.assign + n * M_max;
  int32_t* keep = p.keep + n * M_max;
  const int g_real = real_gt_rows(gt, p.G, shared_rows, &g_real_s);
  const int64_t M = p.P + g_real;
  int64_t n_fg = 0, n_bg = 0;
  for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
    int arg = -1;
    const float b =
        best_gt_overlap(candidate_box(p, rois, gt, shared_rows, i), gt, shared_rows, g_real, &arg);
    best[i] = b;
    assign[i] = arg;
    n_fg += arg >= 0 && b >= p.fg_iou;
    n_bg += b < p.bg_hi && b >= p.bg_lo;
  }
  __syncthreads();
  n_fg = block_count(n_fg, red);
  n_bg = block_count(n_bg, red);
  const int64_t fg_take = min(p.fg_per_image, n_fg);
  const int64_t bg_take = min(p.R - fg_take, n_bg);
  auto is_fg = [&](int64_t i) { return assign[i] >= 0 && best[i] >= p.fg_iou; };
  auto is_bg = [&](int64_t i) { return best[i] < p.bg_hi && best[i] >= p.bg_lo; };
  const uint64_t base_fg = sample_base(p.key, p.call, n, 0);
  const uint64_t base_bg = sample_base(p.key, p.call, n, 1);
  uint64_t t_fg = ~uint64_t{0}, t_bg = ~uint64_t{0};
  if (fg_take < n_fg) t_fg = fg_take > 0 ? kth_smallest_rank(is_fg, M, base_fg, fg_take, red) : 0;
  if (bg_take < n_bg) t_bg = bg_take > 0 ? kth_smallest_rank(is_bg, M, base_bg, bg_take, red) : 0;
  const bool none_fg = fg_take == 0, none_bg = bg_take == 0;
  if (threadIdx.x == 0) {
    int64_t f = 0, b = fg_take;
    for (int64_t i = 0; i < M; ++i) {
      if (!none_fg && is_fg(i) && sample_rank(base_fg, i) <= t_fg)
        keep[f++] = static_cast<int32_t>(i);
      if (!none_bg && is_bg(i) && sample_rank(base_bg, i) <= t_bg)
        keep[b++] = static_cast<int32_t>(i);
    }
  }
  __syncthreads();
  const int64_t taken = fg_take + bg_take, C4 = 4 * p.C;
  for (int64_t r = threadIdx.x; r < p.R; r += blockDim.x) {
    const int64_t i = taken > 0 ? keep[r % taken] : r % M;
    const float* a = candidate_box(p, rois, gt, shared_rows, i);
    float* o = p.out_rois + (n * p.R + r) * 5;
    o[0] = static_cast<float>(n);
    for (int j = 0; j < 4; ++j) o[1 + j] = a[j];
    float* trow = p.targets + (n * p.R + r) * C4;
    float* wrow = p.weights + (n * p.R + r) * C4;
    for (int64_t c = 0; c < C4; ++c) {
      trow[c] = 0.f;
      wrow[c] = 0.f;
    }
    int32_t label = 0;
    if (r < fg_take) {
      const float* t = gt + assign[i] * 5;
      label = static_cast<int32_t>(t[4]);
      if (label >= 1 && label < p.C) {
        float d[4];
        bbox_encode(a, t, d);
        for (int j = 0; j < 4; ++j) {
          trow[4 * label + j] = d[j] / p.stds[j];
          wrow[4 * label + j] = 1.f;
        }
      }
    }
    p.labels[n * p.R + r] = label;
  }
}

class ProposalTargetCuda final : public Layer {
 public:
  ProposalTargetCuda(Backend& be, const std::string& name, const ProposalTargetConfig& cfg,
                     const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg), cu_(as_cuda(be)) {
    check_row_major(kind(), name, "rois", in[0]);
    check_row_major(kind(), name, "gt", in[1]);
    N_ = in[1].shape[0];
    G_ = in[1].shape[1];
    P_ = in[0].shape[0] / N_;
    const int64_t M = N_ * (P_ + G_);
    best_ = be.empty(Shape{M}, MemCategory::kWorkspace);
    assign_ = be.empty(Shape{M}, MemCategory::kWorkspace, Layout::kRowMajor, DType::kI32);
    keep_ = be.empty(Shape{M}, MemCategory::kWorkspace, Layout::kRowMajor, DType::kI32);
    key_ = detection_key(cfg.seed, name);
    TBD_LAYER_CHECK(static_cast<std::size_t>(G_) * sizeof(int) <= 48 * 1024, kind(), name, "gt (",
                    N_, ", ", G_, ", 5): at most 12288 gt rows per image on the CUDA backend");
  }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    ProposalTargetArgs p{};
    p.rois = x[0]->f32();
    p.gt = x[1]->f32();
    p.P = P_;
    p.G = G_;
    p.R = cfg_.rois_per_image;
    p.C = cfg_.num_classes;
    p.fg_per_image = static_cast<int64_t>(
        std::nearbyint(cfg_.fg_fraction * static_cast<double>(cfg_.rois_per_image)));
    p.fg_iou = static_cast<float>(cfg_.fg_iou);
    p.bg_hi = static_cast<float>(cfg_.bg_iou_hi);
    p.bg_lo = static_cast<float>(cfg_.bg_iou_lo);
    for (int j = 0; j < 4; ++j) p.stds[j] = static_cast<float>(cfg_.stds[j]);
    p.key = key_;
    p.call = next_call_index();
    p.best = best_.f32();
    p.assign = assign_.data<int32_t>();
    p.keep = keep_.data<int32_t>();
    p.out_rois = y[0]->f32();
    p.labels = y[1]->data<int32_t>();
    p.targets = y[2]->f32();
    p.weights = y[3]->f32();
    proposal_target_kernel<<<static_cast<unsigned>(N_), kImageBlock,
                             static_cast<std::size_t>(G_) * sizeof(int), cu_.stream()>>>(p);
    TBD_CUDA_CHECK_LAST();
  }

  void bprop(MutTensorRefs, TensorRefs, TensorRefs, TensorRefs) override {}

 private:
  ProposalTargetConfig cfg_;
  CudaBackend& cu_;
  int64_t N_ = 0, G_ = 0, P_ = 0;
  uint64_t key_ = 0;
  Tensor best_, assign_, keep_;
};

TBD_REGISTER_LAYER(ProposalTargetConfig, DeviceKind::kCuda, ProposalTargetCuda);

}  // namespace
}  // namespace tbd::cuda
