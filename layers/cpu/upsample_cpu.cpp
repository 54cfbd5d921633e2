// layers/cpu/upsample_cpu.cpp: Upsample2d on oneDNN's nearest resampling primitives.
//
// x and y share x's layout (plain or nChw16c: the generator's activations stay blocked between
// its batch norms and convolutions). For an integer factor s, oneDNN's nearest rule
// (round((o + 0.5) / s - 0.5)) picks input o / s for every output o: the repeat of
// layers/upsample.h. Backward sums each s x s square of dy.
#include "backends/cpu/onednn.h"
#include "layers/upsample.h"

namespace tbd::cpu {
namespace {

using dnnl::memory;

class Upsample2dOneDnn final : public Layer {
 public:
  Upsample2dOneDnn(Backend& be, const std::string& name, const Upsample2dConfig& cfg,
                   const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg), cpu_(as_cpu(be)) {
    x_md_ = md_of(in[0]);
    y_md_ = md_of(outputs_[0]);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    auto& eng = cpu_.engine();
    const auto alg = dnnl::algorithm::resampling_nearest;
    try {
      fwd_pd_ = dnnl::resampling_forward::primitive_desc(
          dnnl::resampling_forward::desc(dnnl::prop_kind::forward_training, alg, x_md_, y_md_),
          attr, eng);
      bwd_pd_ = dnnl::resampling_backward::primitive_desc(
          dnnl::resampling_backward::desc(alg, x_md_, y_md_), attr, eng, fwd_pd_);
    } catch (const dnnl::error& e) {
      throw_layer_error(kind(), name,
                        std::string("oneDNN has no nearest resampling for x ") + in[0].to_string() +
                            ": " + e.what());
    }
    fwd_ = dnnl::resampling_forward(fwd_pd_);
    bwd_ = dnnl::resampling_backward(bwd_pd_);
    const std::size_t scratch =
        std::max(fwd_pd_.scratchpad_desc().get_size(), bwd_pd_.scratchpad_desc().get_size());
    if (scratch) {
      transient(scratch_, scratch);
    }
  }

  // oneDNN resamples nChw16c and nchw alike: as it comes.
  static std::vector<Layout> input_layouts(const Upsample2dConfig&,
                                           const std::vector<TensorDesc>& in) {
    return layouts_as_given(in);
  }
  std::string implementation() const override { return fwd_pd_.impl_info_str(); }

  // y: (N, C, sH, sW)  x: (N, C, H, W)
  void fprop(MutTensorRefs y, TensorRefs x) override {
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, mem(x_md_, x[0]->raw())},
                                         {DNNL_ARG_DST, mem(y_md_, y[0]->raw())}};
    add_scratch(args, fwd_pd_.scratchpad_desc());
    execute(cpu_, fwd_, args, "Upsample2d forward");
  }
  // dx: (N, C, H, W)  dy: (N, C, sH, sW)
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs, TensorRefs) override {
    if (dx[0] == nullptr) return;
    std::unordered_map<int, memory> args{{DNNL_ARG_DIFF_DST, mem(y_md_, dy[0]->raw())},
                                         {DNNL_ARG_DIFF_SRC, mem(x_md_, dx[0]->raw())}};
    add_scratch(args, bwd_pd_.scratchpad_desc());
    execute(cpu_, bwd_, args, "Upsample2d backward");
  }

 private:
  memory mem(const memory::desc& md, void* p) { return memory(md, cpu_.engine(), p); }
  void add_scratch(std::unordered_map<int, memory>& args, const memory::desc& md) {
    if (md.get_size()) args[DNNL_ARG_SCRATCHPAD] = mem(md, scratch_.raw());
  }

  Upsample2dConfig cfg_;
  CpuBackend& cpu_;
  memory::desc x_md_, y_md_;
  dnnl::resampling_forward::primitive_desc fwd_pd_;
  dnnl::resampling_backward::primitive_desc bwd_pd_;
  dnnl::primitive fwd_, bwd_;
  Tensor scratch_;
};

TBD_REGISTER_LAYER(Upsample2dConfig, DeviceKind::kCpu, Upsample2dOneDnn);

}  // namespace
}  // namespace tbd::cpu
