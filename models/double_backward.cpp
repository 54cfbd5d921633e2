// models/double_backward.cpp: the input-gradient rules of append_input_gradient.
#include "models/double_backward.h"

#include <functional>
#include <map>

#include "layers/input_grad.h"
#include "layers/linear.h"
#include "layers/loss.h"
#include "layers/tensor_ops.h"

namespace tbd {
namespace {

// What a rule sees of a forward node (copied: adding nodes moves the graph's node vector).
struct NodeView {
  std::string name;
  std::string kind;
  std::any config;
  Layer* layer = nullptr;
  std::vector<TensorId> inputs;
};

// A rule returns, per input of the node, the tensor holding that input's gradient (-1: none).
using Rule = std::function<std::vector<TensorId>(Graph&, const NodeView&, TensorId dy,
                                                 const std::string& name)>;

// Ties the new node's parameter `index` to the forward node's (to its root if that is tied).
void tie_to(Graph& g, const NodeView& n, std::size_t index) {
  Param& src = n.layer->params().at(index);
  Param& root = src.tied ? *src.tied_to : src;
  g.tie(g.nodes().back().layer->params().at(0), root);
}

const std::map<std::string, Rule>& rules() {
  static const std::map<std::string, Rule> r{
      {LinearConfig::kKind,
       [](Graph& g, const NodeView& n, TensorId dy, const std::string& name) {
         LinearDgradConfig c;
         c.in_features = g.desc(n.inputs[0]).shape[-1];
         TensorId dx = g.add1(name, c, {dy});
         tie_to(g, n, 0);
         return std::vector<TensorId>{dx};
       }},
      {Conv2dConfig::kKind,
       [](Graph& g, const NodeView& n, TensorId dy, const std::string& name) {
         const Shape& xs = g.desc(n.inputs[0]).shape;
         Conv2dDgradConfig c;
         c.conv = std::any_cast<const Conv2dConfig&>(n.config);
         c.in_channels = xs[1], c.in_h = xs[2], c.in_w = xs[3];
         TensorId dx = g.add1(name, c, {dy});
         tie_to(g, n, 0);
         return std::vector<TensorId>{dx};
       }},
      {ActivationConfig::kKind,
       [](Graph& g, const NodeView& n, TensorId dy, const std::string& name) {
         ActivationDgradConfig c;
         c.act = std::any_cast<const ActivationConfig&>(n.config);
         return std::vector<TensorId>{g.add1(name, c, {dy, n.inputs[0]})};
       }},
      {Pool2dConfig::kKind,
       [](Graph& g, const NodeView& n, TensorId dy, const std::string& name) {
         const Shape& xs = g.desc(n.inputs[0]).shape;
         Pool2dDgradConfig c;
         c.pool = std::any_cast<const Pool2dConfig&>(n.config);
         c.in_h = xs[2], c.in_w = xs[3];
         return std::vector<TensorId>{g.add1(name, c, {dy})};
       }},
      {LayerNormConfig::kKind,
       [](Graph& g, const NodeView& n, TensorId dy, const std::string& name) {
         LayerNormDgradConfig c;
         c.ln = std::any_cast<const LayerNormConfig&>(n.config);
         TensorId dx = g.add1(name, c, {dy, n.inputs[0]});
         tie_to(g, n, 0);  // gamma
         return std::vector<TensorId>{dx};
       }},
      {AddConfig::kKind,
       [](Graph&, const NodeView&, TensorId dy, const std::string&) {
         return std::vector<TensorId>{dy, dy};
       }},
      {ReshapeConfig::kKind,
       [](Graph& g, const NodeView& n, TensorId dy, const std::string& name) {
         ReshapeConfig c;
         c.shape = g.desc(n.inputs[0]).shape.dims();
         return std::vector<TensorId>{g.add1(name, c, {dy})};
       }},
      // A layout change: the gradients here are row-major whatever the forward's layouts.
      {ReorderConfig::kKind, [](Graph&, const NodeView&, TensorId dy,
                                const std::string&) { return std::vector<TensorId>{dy}; }},
      {DetachConfig::kKind, [](Graph&, const NodeView&, TensorId,
                               const std::string&) { return std::vector<TensorId>{-1}; }},
  };
  return r;
}

}  // namespace

const std::vector<std::string>& input_gradient_kinds() {
  static const std::vector<std::string> kinds = [] {
    std::vector<std::string> k;
    for (const auto& [kind, rule] : rules()) k.push_back(kind);
    return k;
  }();
  return kinds;
}

InputGradient append_input_gradient(Graph& g, TensorId x, TensorId out, const std::string& prefix) {
  const std::size_t n_nodes = g.nodes().size();
  // Tensors that depend on x, in node order.
  std::map<TensorId, bool> dep{{x, true}};
  for (std::size_t i = 0; i < n_nodes; ++i) {
    const Graph::Node& n = g.nodes()[i];
    bool any = false;
    for (TensorId t : n.inputs) any = any || dep.count(t);
    if (any) {
      for (TensorId t : n.outputs) dep[t] = true;
    }
  }
  TBD_CHECK(dep.count(out), "append_input_gradient: '", g.tensor_name(out),
            "' does not depend on '", g.tensor_name(x), "'");

  InputGradient r;
  r.seed = g.input(prefix + ".seed", g.desc(out).shape);
  std::map<TensorId, TensorId> grads{{out, r.seed}};
  std::map<TensorId, int> sums;
  for (std::size_t i = n_nodes; i-- > 0;) {
    TensorId dy = -1;
    NodeView n;
    {  // the node by reference only here: rules add nodes, which may move it
      const Graph::Node& node = g.nodes()[i];
      // Only nodes on a path from x: x's own producer (x may be a node's output, WGAN-GP's
      // interpolation) and nodes fed only by what does not depend on x end the walk.
      bool from_x = false;
      for (TensorId t : node.inputs) from_x = from_x || dep.count(t);
      if (!from_x) continue;
      for (TensorId o : node.outputs) {
        if (!grads.count(o)) continue;
        TBD_CHECK(node.outputs.size() == 1, "append_input_gradient: '", node.layer->name(), "' (",
                  node.layer->kind(), ") has ", node.outputs.size(),
                  " outputs; only single-output kinds have input-gradient rules");
        dy = grads.at(o);
      }
      if (dy < 0) continue;
      n = NodeView{node.layer->name(), node.layer->kind(), node.config, node.layer.get(),
                   node.inputs};
    }
    auto it = rules().find(n.kind);
    if (it == rules().end()) {
      std::string kinds;
      for (const std::string& k : input_gradient_kinds()) kinds += (kinds.empty() ? "" : ", ") + k;
      TBD_CHECK(false, "append_input_gradient: no input-gradient rule for ", n.kind, " '", n.name,
                "' on the path from '", g.tensor_name(x), "' to '", g.tensor_name(out),
                "' (kinds with one: ", kinds, ")");
    }
    const std::vector<TensorId> in_grads = it->second(g, n, dy, prefix + "." + n.name + ".dgrad");
    for (std::size_t k = 0; k < n.inputs.size(); ++k) {
      const TensorId t = n.inputs[k];
      if (k >= in_grads.size() || in_grads[k] < 0 || !dep.count(t)) continue;
      auto [pos, fresh] = grads.emplace(t, in_grads[k]);
      if (!fresh) {
        const std::string sum_name =
            prefix + "." + g.tensor_name(t) + ".sum" + std::to_string(sums[t]++);
        pos->second = g.add1(sum_name, AddConfig{}, {pos->second, in_grads[k]});
      }
    }
  }
  TBD_CHECK(grads.count(x), "append_input_gradient: no gradient reached '", g.tensor_name(x), "'");
  r.dx = grads.at(x);
  return r;
}

}  // namespace tbd
