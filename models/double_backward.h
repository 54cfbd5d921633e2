// models/double_backward.h: double backward, by writing an input gradient as forward nodes.
//
// append_input_gradient(g, x, out) appends to the graph, after the nodes already in it, forward
// nodes that compute dx = d <out, seed> / d x through the nodes on the paths from x to out:
// for each such node, in reverse order, its kind's data gradient as a forward layer
// (layers/input_grad.h) with the node's weights tied in. The result is an ordinary tensor of the
// graph, so a loss of it (GradientPenalty: WGAN-GP's (||d critic / d x||_2 - 1)^2) is trained by
// the graph's ordinary backward, which differentiates through those nodes into the weights and
// into the forward activations they read.
//
// Kinds with an input-gradient rule (the WGAN-GP critic's): Conv2d, Linear, Activation (relu
// and leaky_relu), LayerNorm, Pool2d (average), and the structural Add, Reshape, Reorder;
// Detach passes no gradient. Any other kind on the path is an error naming the node and the
// kinds above. Each sample's input gradient depends only on its own sample when no kind on the
// path mixes samples (BatchNorm would; it has no rule).
#pragma once

#include <string>
#include <vector>

#include "models/graph.h"

namespace tbd {

struct InputGradient {
  TensorId seed = -1;  // a graph input shaped like `out`: the output gradient (fill with ones
                       // for d sum(out) / d x); graph inputs start at zero
  TensorId dx = -1;    // d <out, seed> / d x, shaped like x, row-major
};

// Nodes are named "<prefix>.<node>.dgrad" (sums of several paths "<prefix>.<tensor>.sum<i>").
InputGradient append_input_gradient(Graph& g, TensorId x, TensorId out, const std::string& prefix);

// The kinds append_input_gradient can differentiate through.
const std::vector<std::string>& input_gradient_kinds();

}  // namespace tbd
