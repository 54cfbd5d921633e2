// layers/cpu/boxes.h: the host algorithms of the detection kinds' CPU implementations (IoU
// matrices, top-k, greedy NMS, sampling subsets), on the box arithmetic and the sampling keys
// of layers/detection.h (its conventions: orders, ties, +1 box sides). The tests' references
// use them too.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "layers/detection.h"

namespace tbd {

// (na, nb) IoU matrix of boxes a (na, 4) and b (nb, 4) (box_iou; OpenMP over rows).
void iou_matrix(const float* a, int64_t na, const float* b, int64_t nb, float* out);
// The indices of the k largest scores (k clamped to n), largest first, equal scores by
// ascending index.
std::vector<int64_t> top_k(const float* scores, int64_t n, int64_t k);
// Greedy NMS of boxes (n, 4) already in score order: the positions kept, in order, at most
// max_keep (the greedy result's prefix: it stops there). Precomputed areas, a vectorised
// suppression pass per kept box over the boxes still alive.
std::vector<int64_t> nms_sorted(const float* boxes, int64_t n, float threshold, int64_t max_keep);
// The same on columns (x1, y1, x2, y2 and area, n each), which it reorders (suppressed boxes
// are squeezed out as they accumulate, so later passes scan only live ones), with caller-owned
// scratch: suppressed (n; 32-bit flags keep the pass in 32-bit lanes), pos (n) and keep (max_keep,
// the kept input positions); returns how many were kept. No allocation.
int64_t nms_columns(float* x1, float* y1, float* x2, float* y2, float* area, int64_t n,
                    float threshold, int64_t max_keep, int32_t* suppressed, int64_t* pos,
                    int64_t* keep);

// The k candidates (indices) with the smallest sample_rank(base, index), in ascending index
// order; all of them when k >= their count.
std::vector<int64_t> sample_subset(const std::vector<int64_t>& candidates, int64_t k,
                                   uint64_t base);
// The same with caller-owned scratch (n pairs) and output (min(k, n)); returns the count.
int64_t sample_subset_into(const int64_t* candidates, int64_t n, int64_t k, uint64_t base,
                           std::pair<uint64_t, int64_t>* scratch, int64_t* out);

}  // namespace tbd
