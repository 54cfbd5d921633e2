// models/inception_v3.h: Inception-v3 as torchvision defines it (3x299x299 images, 1000
// classes), trained with its auxiliary classifier, as TBD's TF-slim run did.
//
// Every convolution is torchvision's BasicConv2d: conv (no bias) -> BatchNorm (eps 1e-3,
// affine) -> ReLU. Stem (NCHW, batch omitted): 3x3/2 -> 32x149x149, 3x3 -> 32x147x147, 3x3 p1
// -> 64x147x147, maxpool 3x3/2 -> 73x73, 1x1 -> 80, 3x3 -> 192x71x71, maxpool 3x3/2 -> 35x35.
// Modules (branches concatenated along channels, in torchvision's order):
//   Mixed_5b/5c/5d  InceptionA (pool features 32, 64, 64) -> 256, 288, 288 x35x35
//   Mixed_6a        InceptionB -> 768x17x17 (3x3/2 | 1x1, 3x3, 3x3/2 | maxpool 3x3/2)
//   Mixed_6b..6e    InceptionC (c7 = 128, 160, 160, 192) -> 768x17x17, with 1x7 (pad 0,3) and
//                   7x1 (pad 3,0) convolutions
//   AuxLogits       on Mixed_6e: avgpool 5x5/3 -> 768x5x5, 1x1 -> 128, 5x5 valid -> 768x1x1,
//                   FC 768 -> classes; its loss counts 0.4 (TF-slim's aux weight)
//   Mixed_7a        InceptionD -> 1280x8x8
//   Mixed_7b, 7c    InceptionE -> 2048x8x8 (1x3 and 3x1 branches off one shared input)
//   global avgpool -> 2048, dropout 0.5, FC 2048 -> classes
// The 3x3 stride-1 average pools of InceptionA/C/E (pad 1) and the aux head's pool count the
// padding in the divisor (count_include_pad): torchvision's F.avg_pool2d default, so tbd and its
// PyTorch peer compute the same function (TF's 'SAME' pooling excludes it, MXNet includes it).
// Loss = CE(fc) + 0.4 * CE(aux); SGD momentum 0.9, weight decay 1e-4 on conv and FC weights.
// Parameters: 23,834,568 without the aux head, 27,161,264 with it (torchvision's published
// count for this configuration); inception_v3_param_count() derives them from the spec.
#pragma once

#include <memory>

#include "models/model.h"

namespace tbd {

struct InceptionV3Options {
  int64_t batch = 32;
  int64_t image = 299;
  int64_t classes = 1000;
  bool aux = true;  // the auxiliary classifier (trained, weight aux_weight)
  double aux_weight = 0.4;
  double dropout = 0.5;
  int64_t width_div = 1;  // divides every channel count (tiny test configurations)
  double lr = 0.1;
  uint64_t seed = 0;
  bool build_only = false;  // the graph without storage (ModelArgs::build_only)
};

// Parameters of the configuration (classes, aux, width_div), from the layer list.
int64_t inception_v3_param_count(const InceptionV3Options& o);

std::unique_ptr<Model> build_inception_v3(Backend& be, const InceptionV3Options& o);
// The tiny configuration the model tests train and tools/peers mirrors: 4 images of 75x75 (the
// smallest input every module fits: 7x7 into Mixed_5b, 1x1 out of Mixed_7c), 10 classes, no
// auxiliary head (its 5x5/3 pool and 5x5 conv need 17x17 at Mixed_6e), channels / 16.
InceptionV3Options inception_v3_tiny();

}  // namespace tbd
