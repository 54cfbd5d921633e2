// models/resnet50.h: ResNet-50 v1.5 (He et al. 2016; torchvision's v1.5 with the stride on
// the 3x3 convolution). 224x224x3 images, 1000 classes, SGD momentum 0.9, weight decay 1e-4.
// 25,557,032 parameters: convolutions 23,454,912 (no biases), batchnorm scale/shift 106,240
// (53 batchnorms), fc 2048x1000 + 1000 = 2,049,000. Running statistics are buffers, not
// parameters.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "layers/conv2d.h"
#include "models/model.h"

namespace tbd {

struct ResNetStage {
  int blocks;
  int64_t width;   // bottleneck width (64, 128, 256, 512); output channels = 4 * width
  int64_t stride;  // of the first block
};
std::vector<ResNetStage> resnet50_stages();  // {3,64,1} {4,128,2} {6,256,2} {3,512,2}

struct ConvShape {
  std::string name;
  int64_t c, h, w;  // input (C, H, W)
  Conv2dConfig cfg;
};

struct BottleneckSpec {
  std::string name;    // "layer2.0"
  int64_t in_c, h, w;  // block input
  int64_t width;       // bottleneck width; output channels 4*width
  int64_t stride;      // on conv2 (v1.5) and the downsample
  bool downsample;     // projection shortcut (1x1 conv + bn)
};
std::vector<BottleneckSpec> resnet50_blocks(int64_t image = 224);
// Any bottleneck ResNet: the blocks after a stem of `stem_channels` (tests use narrow ones).
std::vector<BottleneckSpec> resnet_blocks(int64_t image, const std::vector<ResNetStage>& stages,
                                          int64_t stem_channels);
// conv1, conv2, conv3 (and downsample) of one block, in the order the model runs them.
std::vector<ConvShape> bottleneck_convs(const BottleneckSpec& b);
ConvShape resnet50_stem(int64_t image = 224);

struct ResNetOptions {
  int64_t batch = 32;
  int64_t image = 224;
  int64_t classes = 1000;
  // Tiny variants for tests: channel divisor (widths / width_div) and stages used.
  int64_t width_div = 1;
  int num_stages = 4;
  int blocks_per_stage = 0;  // 0: ResNet-50's 3, 4, 6, 3
  double lr = 0.1;
  uint64_t seed = 0;
  bool build_only = false;  // the graph without storage (ModelArgs::build_only)
};

// The parameter count above, from the specification (tests compare it with the built model).
int64_t resnet50_param_count();  // 25,557,032

std::unique_ptr<Model> build_resnet50(Backend& be, const ResNetOptions& opt);
// The tiny configuration the model tests train and tools/peers mirrors: 8 images of 32x32, 10
// classes, widths / 16 (stem 4 channels, bottleneck widths 4 and 8), 2 stages of one block.
ResNetOptions resnet50_tiny();

}  // namespace tbd
