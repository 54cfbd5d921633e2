// models/faster_rcnn.h: Faster R-CNN with a ResNet-101 backbone, trained end to end as TBD ran
// it (MXNet's rcnn example, `train_end2end.py --network resnet`; ../shared/notes/tbd_models.md
// section 3).
//
// One step, per image of image_h x image_w (600 x 1000, Pascal VOC's 21 classes):
//   bn_data (frozen BN on the pixels) -> conv0 7x7/2 64 -> bn0 + ReLU -> maxpool 3x3/2
//   stage1..3: pre-activation (v2) bottleneck units 3 / 4 / 23 of 256 / 512 / 1024 channels,
//     stride 2 in the first unit of stages 2 and 3 -> conv_feat at stride 16 (1024 channels)
//   RPN: 3x3 conv 512 + ReLU; 1x1 objectness 2A (A = 9 anchors: 3 scales x 3 ratios), 1x1 box
//     deltas 4A. AnchorTarget labels and encodes 256 anchors per image against the ground truth;
//     Proposal decodes, clips, keeps the top 12000, runs NMS at 0.7 and keeps 2000 per image;
//     ProposalTarget samples 128 RoIs per image (a quarter foreground) with their targets.
//   RoIPool 14x14 at 1/16 on conv_feat -> stage4 (3 units of 2048, stride 2 in the first) ->
//     bn1 + ReLU -> global average pool -> classifier (21) and box regressor (84).
//   Loss = RPN objectness CE (ignore -1, mean over the sampled anchors) + RPN smooth-L1 (sigma 3,
//     / 256 per image) + detector CE (mean over the RoIs) + detector smooth-L1 (sigma 1, / 128
//     per image).
// Every BatchNorm is frozen (fixed statistics, eps 2e-5); conv0 and stage 1 are frozen too, so
// nothing before stage 2 runs a backward. SGD: lr 0.001, momentum 0.9, weight decay 5e-4,
// element-wise gradient clip 5; the frozen parameters are not in the optimizer.
// Ground truth: `num_gt` random boxes per image (integer corners, sides from 32 px to half the
// image, classes in [1, classes)), padded to `max_gt` rows of -1: synthetic, fixed at build.
// The proposal, NMS and sampling nodes carry no gradient. Parameters: 47,454,565 stored,
// 47,134,367 trained (faster_rcnn_param_count; the note's arithmetic).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "layers/roi_pool.h"
#include "models/model.h"

namespace tbd {

struct FasterRcnnOptions {
  int64_t batch = 1;  // images per step
  int64_t image_h = 600, image_w = 1000;
  int64_t classes = 21;  // with the background
  int64_t max_gt = 100;  // ground-truth rows per image (padded)
  int64_t num_gt = 5;    // of which real
  // Backbone: units per stage (stages 1-3 to stride 16, then stage 4 on the RoIs) and a divisor
  // of every channel count (tiny test configurations).
  std::vector<int> units = {3, 4, 23, 3};
  int64_t width_div = 1;
  // Anchors and sampling.
  std::vector<double> anchor_scales = {8, 16, 32};
  std::vector<double> anchor_ratios = {0.5, 1, 2};
  int64_t rpn_channels = 512;
  int64_t rpn_batch = 256;  // anchors sampled per image
  int64_t pre_nms = 12000, post_nms = 2000;
  int64_t rois_per_image = 128;
  int64_t pooled = 14;
  RoIPoolMode roi_mode = RoIPoolMode::kMax;  // kAlign: RoIAlign (today's detectors)
  double lr = 0.001;
  uint64_t seed = 0;
  bool build_only = false;
};

// The feature map (stride 16) the RPN runs on: (h, w).
std::pair<int64_t, int64_t> faster_rcnn_feature_size(const FasterRcnnOptions& o);
// The tests' tiny configuration (CPU and CUDA alike): 2 images of 64x64, 3 classes, one real
// box each, 4 one-unit stages with channels / 4, 2 anchors per cell (16 and 32 pixels) on a 4x4
// map, 16 anchors and 8 RoIs sampled per image, 4x4 RoI bins, lr 0.01, seed 14.
FasterRcnnOptions faster_rcnn_tiny();
// Parameters stored (every layer's weights, the frozen ones included; BatchNorm's gamma and
// beta, not its running statistics) or trained (without conv0, stage 1 and every BatchNorm).
int64_t faster_rcnn_param_count(const FasterRcnnOptions& o, bool trained);

// The model's own step state beyond Model: the four loss terms of the last step.
class FasterRcnn : public Model {
 public:
  using Model::Model;
  // (name, value) of rpn_cls, rpn_bbox, rcnn_cls, rcnn_bbox after the last step.
  std::vector<std::pair<std::string, float>> loss_terms();

 private:
  friend std::unique_ptr<FasterRcnn> build_faster_rcnn(Backend&, const FasterRcnnOptions&);
  std::vector<std::pair<std::string, TensorId>> terms_;
};

std::unique_ptr<FasterRcnn> build_faster_rcnn(Backend& be, const FasterRcnnOptions& o);

}  // namespace tbd
