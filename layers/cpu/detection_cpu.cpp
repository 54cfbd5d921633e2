// layers/cpu/detection_cpu.cpp: Proposal, AnchorTarget and ProposalTarget on the CPU, own
// loops over the box library of layers/detection.h (row-major).
//
// Proposal: the decode, clip, size filter and score of every anchor of every image in one
// OpenMP loop; then per image (OpenMP over images): the candidates' top pre_nms_top_n by
// nth_element and a sort, the survivors gathered into columns with their areas, and greedy NMS
// with one vectorised suppression pass per kept box that stops at post_nms_top_n kept.
// AnchorTarget and ProposalTarget: OpenMP over images; the anchors and the inside-the-image
// list are computed once at build. All scratch is allocated at build, per image.
#include <algorithm>
#include <cmath>

#include "layers/cpu/boxes.h"
#include "layers/detection.h"

namespace tbd::cpu {
namespace {

using KeyIdx = std::pair<uint64_t, int64_t>;

template <class T>
T* at(std::vector<T>& v, int64_t offset) {
  return v.data() + offset;
}

// ---- Proposal ----

class ProposalCpu final : public Layer {
 public:
  ProposalCpu(Backend& be, const std::string& name, const ProposalConfig& cfg,
              const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg) {
    N_ = in[0].shape[0];
    A_ = cfg.anchors.num_anchors();
    HW_ = cfg.anchors.feature_h * cfg.anchors.feature_w;
    K_ = A_ * HW_;
    pre_ = std::min(cfg.pre_nms_top_n, K_);
    post_ = cfg.post_nms_top_n;
    anchors_ = anchor_grid(cfg.anchors);
    const auto nk = static_cast<std::size_t>(N_ * K_), np = static_cast<std::size_t>(N_ * pre_);
    boxes_.resize(nk * 4);
    scores_.resize(nk);
    valid_.resize(nk);
    cand_.resize(nk);
    cols_.resize(np * 5);
    suppressed_.resize(np);
    pos_.resize(np);
    keep_.resize(static_cast<std::size_t>(N_ * std::min(post_, pre_)));
  }

  // rois (N*post, 5); cls (N, 2A, H, W), deltas (N, 4A, H, W)
  void fprop(MutTensorRefs y, TensorRefs x) override {
    const float* cls = x[0]->f32();
    const float* del = x[1]->f32();
    const int64_t K = K_, HW = HW_, A = A_;
    const float im_h = static_cast<float>(cfg_.anchors.image_h);
    const float im_w = static_cast<float>(cfg_.anchors.image_w);
    const auto min_size = static_cast<float>(cfg_.min_size);
#pragma omp parallel for schedule(static)
    for (int64_t nk = 0; nk < N_ * K; ++nk) {
      const int64_t n = nk / K, k = nk % K, a = k / HW, hw = k % HW;
      float d[4];
      for (int j = 0; j < 4; ++j) d[j] = del[((n * 4 * A) + 4 * a + j) * HW + hw];
      float* b = &boxes_[static_cast<std::size_t>(nk * 4)];
      bbox_decode(&anchors_[static_cast<std::size_t>(k * 4)], d, b);
      bbox_clip(b, im_h, im_w);
      // + 0.f: -0 becomes +0, so equal scores are equal keys for a radix sort too.
      scores_[nk] = (cls[(n * 2 * A + A + a) * HW + hw] - cls[(n * 2 * A + a) * HW + hw]) + 0.f;
      valid_[nk] = (b[2] - b[0] + 1.f) >= min_size && (b[3] - b[1] + 1.f) >= min_size;
    }
    float* out = y[0]->f32();
#pragma omp parallel for schedule(dynamic, 1) if (N_ > 1)
    for (int64_t n = 0; n < N_; ++n) propose_image(n, out + n * post_ * 5);
  }

  void bprop(MutTensorRefs, TensorRefs, TensorRefs, TensorRefs) override {}

 private:
  void propose_image(int64_t n, float* out) {
    const int64_t K = K_;
    const float* score = at(scores_, n * K);
    const float* boxes = at(boxes_, n * K * 4);
    int64_t* cand = at(cand_, n * K);
    int64_t m = 0;
    for (int64_t k = 0; k < K; ++k) {
      if (valid_[n * K + k]) cand[m++] = k;
    }
    const int64_t take = std::min(pre_, m);
    auto before = [score](int64_t i, int64_t j) {
      return score[i] > score[j] || (score[i] == score[j] && i < j);
    };
    if (take < m) std::nth_element(cand, cand + take, cand + m, before);
    std::sort(cand, cand + take, before);
    float* c = at(cols_, n * pre_ * 5);
    float *x1 = c, *y1 = c + pre_, *x2 = c + 2 * pre_, *y2 = c + 3 * pre_, *area = c + 4 * pre_;
    for (int64_t i = 0; i < take; ++i) {
      const float* b = boxes + cand[i] * 4;
      x1[i] = b[0];
      y1[i] = b[1];
      x2[i] = b[2];
      y2[i] = b[3];
      area[i] = box_area(b);
    }
    const int64_t max_keep = std::min(post_, pre_);
    int64_t* keep = at(keep_, n * max_keep);
    const int64_t kept =
        nms_columns(x1, y1, x2, y2, area, take, static_cast<float>(cfg_.nms_threshold), max_keep,
                    at(suppressed_, n * pre_), at(pos_, n * pre_), keep);
    for (int64_t r = 0; r < post_; ++r) {
      float* o = out + r * 5;
      o[0] = static_cast<float>(n);
      if (kept == 0) {
        o[1] = o[2] = o[3] = o[4] = 0.f;
        continue;
      }
      const float* b = boxes + cand[keep[r % kept]] * 4;
      std::copy(b, b + 4, o + 1);
    }
  }

  ProposalConfig cfg_;
  int64_t N_ = 0, A_ = 0, HW_ = 0, K_ = 0, pre_ = 0, post_ = 0;
  std::vector<float> anchors_;  // (K, 4)
  std::vector<float> boxes_;    // (N, K, 4) decoded and clipped
  std::vector<float> scores_;   // (N, K)
  std::vector<uint8_t> valid_;  // (N, K) passes the size filter
  std::vector<int64_t> cand_;   // (N, K) candidates, the top pre_ first in order
  std::vector<float> cols_;     // (N, 5, pre) x1, y1, x2, y2, area of the sorted top
  std::vector<int32_t> suppressed_;
  std::vector<int64_t> pos_;
  std::vector<int64_t> keep_;
};

TBD_REGISTER_LAYER(ProposalConfig, DeviceKind::kCpu, ProposalCpu);

// The real gt rows (class >= 0) of one image: their positions in the (G, 5) block.
int64_t real_gt(const float* gt, int64_t G, int64_t* rows) {
  int64_t g_real = 0;
  for (int64_t g = 0; g < G; ++g) {
    if (gt[g * 5 + 4] >= 0.f) rows[g_real++] = g;
  }
  return g_real;
}

// ---- AnchorTarget ----

class AnchorTargetCpu final : public Layer {
 public:
  AnchorTargetCpu(Backend& be, const std::string& name, const AnchorTargetConfig& cfg,
                  const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg) {
    N_ = in[0].shape[0];
    G_ = in[0].shape[1];
    HW_ = cfg.anchors.feature_h * cfg.anchors.feature_w;
    K_ = cfg.anchors.num_anchors() * HW_;
    anchors_ = anchor_grid(cfg.anchors);
    const auto iw = static_cast<float>(cfg.anchors.image_w);
    const auto ih = static_cast<float>(cfg.anchors.image_h);
    for (int64_t k = 0; k < K_; ++k) {
      const float* a = &anchors_[static_cast<std::size_t>(k * 4)];
      if (a[0] >= 0.f && a[1] >= 0.f && a[2] < iw && a[3] < ih) inside_.push_back(k);
    }
    key_ = detection_key(cfg.seed, name);
    const auto n = static_cast<std::size_t>(N_);
    gt_rows_.resize(n * static_cast<std::size_t>(G_));
    gt_max_.resize(n * static_cast<std::size_t>(G_));
    argmax_.resize(n * static_cast<std::size_t>(K_));
    fg_.resize(n * inside_.size());
    bg_.resize(n * inside_.size());
    chosen_.resize(n * inside_.size());
    scratch_.resize(n * inside_.size());
  }

  // labels (N, K) i32, bbox_targets (N, 4A, H, W), bbox_weights (N, 4A, H, W); gt (N, G, 5)
  void fprop(MutTensorRefs y, TensorRefs x) override {
    const uint64_t call = next_call_index();
    const float* gt = x[0]->f32();
    int32_t* labels = y[0]->data<int32_t>();
    float* targets = y[1]->f32();
    float* weights = y[2]->f32();
#pragma omp parallel for schedule(dynamic, 1) if (N_ > 1)
    for (int64_t n = 0; n < N_; ++n) {
      assign_image(n, call, gt + n * G_ * 5, labels + n * K_, targets + n * 4 * K_,
                   weights + n * 4 * K_);
    }
  }

  void bprop(MutTensorRefs, TensorRefs, TensorRefs, TensorRefs) override {}

 private:
  void assign_image(int64_t n, uint64_t call, const float* gt, int32_t* labels, float* targets,
                    float* weights) {
    const int64_t K = K_, HW = HW_, n_in = static_cast<int64_t>(inside_.size());
    int64_t* rows = at(gt_rows_, n * G_);
    float* gt_max = at(gt_max_, n * G_);
    int32_t* argmax = at(argmax_, n * K);
    const int64_t g_real = real_gt(gt, G_, rows);
    std::fill(labels, labels + K, -1);
    std::fill(targets, targets + 4 * K, 0.f);
    std::fill(weights, weights + 4 * K, 0.f);
    // Each real gt's best IoU over the inside anchors.
    for (int64_t g = 0; g < g_real; ++g) {
      const float* b = gt + rows[g] * 5;
      const float area_b = box_area(b);
      float best = 0.f;
      for (int64_t i = 0; i < n_in; ++i) {
        const float* a = &anchors_[static_cast<std::size_t>(inside_[i] * 4)];
        best = std::max(best, box_iou_areas(a, box_area(a), b, area_b));
      }
      gt_max[g] = best;
    }
    const auto pos = static_cast<float>(cfg_.positive_iou);
    const auto neg = static_cast<float>(cfg_.negative_iou);
    int64_t* fg = at(fg_, n * n_in);
    int64_t* bg = at(bg_, n * n_in);
    int64_t n_fg = 0, n_bg = 0;
    for (int64_t i = 0; i < n_in; ++i) {
      const int64_t k = inside_[i];
      const float* a = &anchors_[static_cast<std::size_t>(k * 4)];
      const float area_a = box_area(a);
      float best = -1.f;
      int32_t arg = -1;
      bool best_of_gt = false;
      for (int64_t g = 0; g < g_real; ++g) {
        const float* b = gt + rows[g] * 5;
        const float iou = box_iou_areas(a, area_a, b, box_area(b));
        if (iou > best) {
          best = iou;
          arg = static_cast<int32_t>(rows[g]);
        }
        best_of_gt |= gt_max[g] > 0.f && iou == gt_max[g];
      }
      argmax[k] = arg;
      if (g_real == 0 || best < neg) labels[k] = 0;
      if (g_real > 0 && (best_of_gt || best >= pos)) labels[k] = 1;
      if (labels[k] == 1) fg[n_fg++] = k;
      if (labels[k] == 0) bg[n_bg++] = k;
    }
    // Subsample: at most batch_size fg_fraction positives, negatives to fill batch_size.
    const auto max_fg =
        static_cast<int64_t>(std::floor(cfg_.fg_fraction * static_cast<double>(cfg_.batch_size)));
    int64_t* chosen = at(chosen_, n * n_in);
    KeyIdx* scratch = at(scratch_, n * n_in);
    if (n_fg > max_fg) {
      const int64_t c =
          sample_subset_into(fg, n_fg, max_fg, sample_base(key_, call, n, 0), scratch, chosen);
      for (int64_t i = 0; i < n_fg; ++i) labels[fg[i]] = -1;
      for (int64_t i = 0; i < c; ++i) labels[chosen[i]] = 1;
      n_fg = c;
      std::copy(chosen, chosen + c, fg);
    }
    const int64_t max_bg = cfg_.batch_size - n_fg;
    if (n_bg > max_bg) {
      const int64_t c =
          sample_subset_into(bg, n_bg, max_bg, sample_base(key_, call, n, 1), scratch, chosen);
      for (int64_t i = 0; i < n_bg; ++i) labels[bg[i]] = -1;
      for (int64_t i = 0; i < c; ++i) labels[chosen[i]] = 0;
    }
    for (int64_t i = 0; i < n_fg; ++i) {
      const int64_t k = fg[i], a = k / HW, hw = k % HW;
      float d[4];
      bbox_encode(&anchors_[static_cast<std::size_t>(k * 4)], gt + argmax[k] * 5, d);
      for (int64_t j = 0; j < 4; ++j) {
        targets[(4 * a + j) * HW + hw] = d[j];
        weights[(4 * a + j) * HW + hw] = 1.f;
      }
    }
  }

  AnchorTargetConfig cfg_;
  int64_t N_ = 0, G_ = 0, HW_ = 0, K_ = 0;
  uint64_t key_ = 0;

  std::vector<float> anchors_;   // (K, 4)
  std::vector<int64_t> inside_;  // anchors inside the image, ascending
  std::vector<int64_t> gt_rows_;
  std::vector<float> gt_max_;
  std::vector<int32_t> argmax_;
  std::vector<int64_t> fg_, bg_, chosen_;
  std::vector<KeyIdx> scratch_;
};

TBD_REGISTER_LAYER(AnchorTargetConfig, DeviceKind::kCpu, AnchorTargetCpu);

// ---- ProposalTarget ----

class ProposalTargetCpu final : public Layer {
 public:
  ProposalTargetCpu(Backend& be, const std::string& name, const ProposalTargetConfig& cfg,
                    const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg) {
    N_ = in[1].shape[0];
    G_ = in[1].shape[1];
    P_ = in[0].shape[0] / N_;
    M_ = P_ + G_;
    key_ = detection_key(cfg.seed, name);
    const auto nm = static_cast<std::size_t>(N_ * M_);
    cand_.resize(nm * 4);
    best_.resize(nm);
    assign_.resize(nm);
    fg_.resize(nm);
    bg_.resize(nm);
    keep_.resize(nm);
    scratch_.resize(nm);
    gt_rows_.resize(static_cast<std::size_t>(N_ * G_));
  }

  // rois (N*R, 5), labels (N*R) i32, bbox_targets / bbox_weights (N*R, 4C); rois (N*P, 5),
  // gt (N, G, 5)
  void fprop(MutTensorRefs y, TensorRefs x) override {
    const uint64_t call = next_call_index();
    const float* rois = x[0]->f32();
    const float* gt = x[1]->f32();
    const int64_t R = cfg_.rois_per_image, C4 = 4 * cfg_.num_classes;
#pragma omp parallel for schedule(dynamic, 1) if (N_ > 1)
    for (int64_t n = 0; n < N_; ++n) {
      sample_image(n, call, rois + n * P_ * 5, gt + n * G_ * 5, y[0]->f32() + n * R * 5,
                   y[1]->data<int32_t>() + n * R, y[2]->f32() + n * R * C4,
                   y[3]->f32() + n * R * C4);
    }
  }

  void bprop(MutTensorRefs, TensorRefs, TensorRefs, TensorRefs) override {}

 private:
  void sample_image(int64_t n, uint64_t call, const float* rois, const float* gt, float* out_rois,
                    int32_t* labels, float* targets, float* weights) {
    const int64_t R = cfg_.rois_per_image, C4 = 4 * cfg_.num_classes;
    int64_t* rows = at(gt_rows_, n * G_);
    const int64_t g_real = real_gt(gt, G_, rows);
    const int64_t M = P_ + g_real;
    float* cand = at(cand_, n * M_ * 4);
    float* best = at(best_, n * M_);
    int64_t* assign = at(assign_, n * M_);
    for (int64_t i = 0; i < P_; ++i) std::copy(rois + i * 5 + 1, rois + i * 5 + 5, cand + i * 4);
    for (int64_t g = 0; g < g_real; ++g) {
      std::copy(gt + rows[g] * 5, gt + rows[g] * 5 + 4, cand + (P_ + g) * 4);
    }
    const auto fg_iou = static_cast<float>(cfg_.fg_iou);
    const auto bg_hi = static_cast<float>(cfg_.bg_iou_hi);
    const auto bg_lo = static_cast<float>(cfg_.bg_iou_lo);
    int64_t* fg = at(fg_, n * M_);
    int64_t* bg = at(bg_, n * M_);
    int64_t n_fg = 0, n_bg = 0;
    for (int64_t i = 0; i < M; ++i) {
      int64_t arg = -1;
      const float b = best_gt_overlap(cand + i * 4, gt, rows, g_real, &arg);
      best[i] = b;
      assign[i] = arg;
      if (arg >= 0 && b >= fg_iou) fg[n_fg++] = i;
      if (b < bg_hi && b >= bg_lo) bg[n_bg++] = i;
    }
    const auto fg_per_image = static_cast<int64_t>(
        std::nearbyint(cfg_.fg_fraction * static_cast<double>(cfg_.rois_per_image)));
    int64_t* keep = at(keep_, n * M_);
    KeyIdx* scratch = at(scratch_, n * M_);
    const int64_t fg_take = sample_subset_into(fg, n_fg, std::min(fg_per_image, n_fg),
                                               sample_base(key_, call, n, 0), scratch, keep);
    const int64_t bg_take =
        sample_subset_into(bg, n_bg, std::min(R - fg_take, n_bg), sample_base(key_, call, n, 1),
                           scratch, keep + fg_take);
    const int64_t taken = fg_take + bg_take;
    std::fill(targets, targets + R * C4, 0.f);
    std::fill(weights, weights + R * C4, 0.f);
    for (int64_t r = 0; r < R; ++r) {
      const int64_t i = taken > 0 ? keep[r % taken] : r % M;
      const float* a = cand + i * 4;
      float* o = out_rois + r * 5;
      o[0] = static_cast<float>(n);
      std::copy(a, a + 4, o + 1);
      if (r >= fg_take) {
        labels[r] = 0;
        continue;
      }
      const float* t = gt + assign[i] * 5;
      const auto c = static_cast<int32_t>(t[4]);
      labels[r] = c;
      if (c < 1 || c >= cfg_.num_classes) continue;  // not a class: no targets (see the header)
      float d[4];
      bbox_encode(a, t, d);
      for (int j = 0; j < 4; ++j) {
        targets[r * C4 + 4 * c + j] = d[j] / static_cast<float>(cfg_.stds[j]);
        weights[r * C4 + 4 * c + j] = 1.f;
      }
    }
  }

  ProposalTargetConfig cfg_;
  int64_t N_ = 0, G_ = 0, P_ = 0, M_ = 0;
  uint64_t key_ = 0;

  std::vector<float> cand_;  // (N, P + G, 4): the RoIs, then the real gt
  std::vector<float> best_;
  std::vector<int64_t> assign_, fg_, bg_, keep_, gt_rows_;
  std::vector<KeyIdx> scratch_;
};

TBD_REGISTER_LAYER(ProposalTargetConfig, DeviceKind::kCpu, ProposalTargetCpu);

}  // namespace
}  // namespace tbd::cpu
