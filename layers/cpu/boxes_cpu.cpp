// layers/cpu/boxes_cpu.cpp
#include "layers/cpu/boxes.h"

#include <algorithm>
#include <numeric>

#include "layers/cpu/simd.h"

namespace tbd {

void iou_matrix(const float* a, int64_t na, const float* b, int64_t nb, float* out) {
#pragma omp parallel for schedule(static) if (na * nb > 16384)
  for (int64_t i = 0; i < na; ++i) {
    const float area_a = box_area(a + 4 * i);
    for (int64_t j = 0; j < nb; ++j) {
      out[i * nb + j] = box_iou_areas(a + 4 * i, area_a, b + 4 * j, box_area(b + 4 * j));
    }
  }
}

std::vector<int64_t> top_k(const float* scores, int64_t n, int64_t k) {
  k = std::clamp<int64_t>(k, 0, n);
  std::vector<int64_t> idx(static_cast<std::size_t>(n));
  std::iota(idx.begin(), idx.end(), int64_t{0});
  auto before = [scores](int64_t i, int64_t j) {
    return scores[i] > scores[j] || (scores[i] == scores[j] && i < j);
  };
  if (k < n) std::nth_element(idx.begin(), idx.begin() + k, idx.end(), before);
  idx.resize(static_cast<std::size_t>(k));
  std::sort(idx.begin(), idx.end(), before);
  return idx;
}

namespace {

// Marks every box j in [from, n) whose IoU with box b exceeds the threshold (box_iou_areas's
// operations in the same order, so the decision is the scalar one); returns how many it newly
// marked.
TBD_SIMD_CLONES int64_t suppress_after(const float* x1, const float* y1, const float* x2,
                                       const float* y2, const float* area, int64_t from, int64_t n,
                                       float bx1, float by1, float bx2, float by2, float barea,
                                       float threshold, int32_t* suppressed) {
  int32_t newly = 0;
#pragma omp simd reduction(+ : newly)
  for (int64_t j = from; j < n; ++j) {
    const float iw = (std::min(bx2, x2[j]) - std::max(bx1, x1[j])) + 1.f;
    const float ih = (std::min(by2, y2[j]) - std::max(by1, y1[j])) + 1.f;
    const float inter = iw * ih;
    const float iou = (iw > 0.f && ih > 0.f) ? inter / ((barea + area[j]) - inter) : 0.f;
    const int32_t s = suppressed[j] | static_cast<int32_t>(iou > threshold);
    newly += s - suppressed[j];
    suppressed[j] = s;
  }
  return newly;
}

}  // namespace

int64_t nms_columns(float* x1, float* y1, float* x2, float* y2, float* area, int64_t n,
                    float threshold, int64_t max_keep, int32_t* suppressed, int64_t* pos,
                    int64_t* keep) {
  std::fill(suppressed, suppressed + n, 0);
  std::iota(pos, pos + n, int64_t{0});
  int64_t kept = 0, m = n, dead = 0;
  for (int64_t i = 0; i < m && kept < max_keep; ++i) {
    if (suppressed[i]) continue;
    keep[kept++] = pos[i];
    if (kept == max_keep) break;
    dead += suppress_after(x1, y1, x2, y2, area, i + 1, m, x1[i], y1[i], x2[i], y2[i], area[i],
                           threshold, suppressed);
    // Once a quarter of what is left is suppressed, squeeze it out (order kept), so that later
    // passes scan only live boxes (results/tuning.md: 9-11 -> 6-7 ms at the full configuration).
    if (4 * dead > m - i) {
      int64_t w = i + 1;
      for (int64_t j = i + 1; j < m; ++j) {
        if (suppressed[j]) continue;
        x1[w] = x1[j];
        y1[w] = y1[j];
        x2[w] = x2[j];
        y2[w] = y2[j];
        area[w] = area[j];
        pos[w] = pos[j];
        suppressed[w] = 0;
        ++w;
      }
      m = w;
      dead = 0;
    }
  }
  return kept;
}

std::vector<int64_t> nms_sorted(const float* boxes, int64_t n, float threshold, int64_t max_keep) {
  const auto sz = static_cast<std::size_t>(n);
  std::vector<float> x1(sz), y1(sz), x2(sz), y2(sz), area(sz);
  for (int64_t i = 0; i < n; ++i) {
    x1[i] = boxes[4 * i];
    y1[i] = boxes[4 * i + 1];
    x2[i] = boxes[4 * i + 2];
    y2[i] = boxes[4 * i + 3];
    area[i] = box_area(boxes + 4 * i);
  }
  std::vector<int32_t> suppressed(sz);
  std::vector<int64_t> pos(sz);
  std::vector<int64_t> keep(static_cast<std::size_t>(std::clamp<int64_t>(max_keep, 0, n)));
  keep.resize(static_cast<std::size_t>(
      nms_columns(x1.data(), y1.data(), x2.data(), y2.data(), area.data(), n, threshold,
                  static_cast<int64_t>(keep.size()), suppressed.data(), pos.data(), keep.data())));
  return keep;
}

int64_t sample_subset_into(const int64_t* candidates, int64_t n, int64_t k, uint64_t base,
                           std::pair<uint64_t, int64_t>* scratch, int64_t* out) {
  k = std::clamp<int64_t>(k, 0, n);
  if (k == n) {
    std::copy(candidates, candidates + n, out);
  } else if (k > 0) {
    for (int64_t i = 0; i < n; ++i) scratch[i] = {sample_rank(base, candidates[i]), candidates[i]};
    std::nth_element(scratch, scratch + (k - 1), scratch + n);
    for (int64_t i = 0; i < k; ++i) out[i] = scratch[i].second;
  }
  std::sort(out, out + k);
  return k;
}

std::vector<int64_t> sample_subset(const std::vector<int64_t>& candidates, int64_t k,
                                   uint64_t base) {
  const auto n = static_cast<int64_t>(candidates.size());
  std::vector<std::pair<uint64_t, int64_t>> scratch(candidates.size());
  std::vector<int64_t> out(static_cast<std::size_t>(std::clamp<int64_t>(k, 0, n)));
  sample_subset_into(candidates.data(), n, k, base, scratch.data(), out.data());
  return out;
}

}  // namespace tbd
