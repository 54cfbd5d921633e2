// layers/cuda/rnn_cuda.cu: LSTM, GRU and LSTMCell on cuDNN's RNN v8 API.
//
// Semantics are those of layers/rnn.h (time-major x: (T, N, I), PyTorch parameter layout and
// gate order). cuDNN uses the same gate order (LSTM i, f, g, o; GRU r, z, n, linear-before-
// reset) and keeps each gate's matrix as a row-major (H, I_l) block, so our row-major
// w_ih (G*H, I_l) splits into G contiguous gate blocks that map 1:1 onto cuDNN's linear layers
// (linLayerID 0..G-1 for the input matrices W, G..2G-1 for the recurrent matrices R).
//
// Biases: cuDNN's default CUDNN_RNN_DOUBLE_BIAS has b_W and b_R per gate, like PyTorch. GRU maps
// b_ih -> b_W and b_hh -> b_R. layers/rnn.h gives LSTM ONE bias per gate (as oneDNN and the TBD
// models count parameters): it maps onto b_W, and cuDNN's b_R stays zero (set once at build,
// never written; its gradient is computed by cuDNN and ignored). The sum b_W + b_R is all that
// enters an LSTM cell, so this is exactly the one-bias LSTM.
//
// Parameters stay in our row-major tensors (weights = 4 bytes x parameter count; optimizers
// stay layout-free). Every forward copies them into cuDNN's weight space (one batched copy
// kernel, pieces found with cudnnGetRNNWeightParams at build); every backward zeroes the
// weight-gradient space, runs cudnnRNNBackwardWeights_v8 (CUDNN_WGRAD_MODE_ADD, the only mode
// cuDNN supports) and adds the pieces onto our gradients (+=, the gradient policy). Weight
// spaces and the cuDNN workspace are `workspace`; the reserve space (what forward saves for
// backward) is `feature_maps`.
//
// Math: strict FP32 -> CUDNN_FMA_MATH (no tensor cores); TF32 -> CUDNN_DEFAULT_MATH (cuDNN may
// use TF32 tensor cores for FP32 data). Read from the backend when the layer is built.
//
// LSTMCell is a one-step LSTM with initial states h, c: y (T = 1) is h', cy is c'; backward
// feeds dh' as dy and dc' as dcy and gets dh, dc as dhx, dcx.
#include <algorithm>
#include <array>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "layers/rnn.h"

namespace tbd::cuda {
namespace {

// ---- RAII cuDNN descriptors ----

template <class T, cudnnStatus_t (*Create)(T*), cudnnStatus_t (*Destroy)(T)>
class CudnnDesc {
 public:
  CudnnDesc() { TBD_CUDNN_CHECK(Create(&d_)); }
  ~CudnnDesc() {
    if (d_) Destroy(d_);
  }
  CudnnDesc(const CudnnDesc&) = delete;
  CudnnDesc& operator=(const CudnnDesc&) = delete;
  T get() const { return d_; }

 private:
  T d_ = nullptr;
};
using TensorDescriptor =
    CudnnDesc<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using RnnDescriptor =
    CudnnDesc<cudnnRNNDescriptor_t, cudnnCreateRNNDescriptor, cudnnDestroyRNNDescriptor>;
using RnnDataDescriptor = CudnnDesc<cudnnRNNDataDescriptor_t, cudnnCreateRNNDataDescriptor,
                                    cudnnDestroyRNNDataDescriptor>;
using DropoutDescriptor = CudnnDesc<cudnnDropoutDescriptor_t, cudnnCreateDropoutDescriptor,
                                    cudnnDestroyDropoutDescriptor>;

// ---- batched segment copy: params <-> cuDNN weight space in one launch ----

// 80 segments x 24 bytes + 8 < 4 KiB, the kernel-parameter limit on every CUDA 13 target.
constexpr int kMaxSegments = 80;
struct SegmentBatch {
  int count = 0;
  bool accumulate = false;  // dst += src instead of dst = src
  const float* src[kMaxSegments];
  float* dst[kMaxSegments];
  int64_t n[kMaxSegments];
};

__global__ void copy_segments_kernel(SegmentBatch b) {
  const int s = blockIdx.y;
  const float* src = b.src[s];
  float* dst = b.dst[s];
  const int64_t n = b.n[s];
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    dst[i] = b.accumulate ? dst[i] + src[i] : src[i];
  }
}

// A block of one of our parameters that lives at `space_offset` (floats) in cuDNN's weight
// space (and at the same offset in the weight-gradient space).
struct Piece {
  int param;
  int64_t param_offset;
  int64_t space_offset;
  int64_t count;
};

enum class Cell { kLstm, kGru };

struct RnnSpec {
  const char* kind;
  Cell cell;
  int64_t hidden;
  int64_t num_layers;
  bool bidirectional;
  bool one_step;  // LSTMCell
};

int64_t gates_of(Cell c) { return c == Cell::kLstm ? 4 : 3; }

class RnnCudnn : public Layer {
 public:
  RnnCudnn(Backend& be, const std::string& name, const RnnSpec& spec,
           const std::vector<TensorDesc>& in, const Contract& c)
      : Layer(be, name, in, c), spec_(spec), cb_(as_cuda(be)) {
    // Shapes, parameters (in the order and with the names of layers/rnn.h) and work come from
    // the kind's contract (layers/rnn.cpp), shared with the CPU backend.
    dirs_ = spec.bidirectional ? 2 : 1;
    if (spec.one_step) {
      T_ = 1, N_ = in[0].shape[0], I_ = in[0].shape[1];
    } else {
      T_ = in[0].shape[0], N_ = in[0].shape[1], I_ = in[0].shape[2];
    }
    const char* names[] = {"x", "h", "c"};
    for (std::size_t i = 0; i < in.size(); ++i) {
      TBD_LAYER_CHECK(in[i].layout == Layout::kRowMajor, spec.kind, name, "input ", names[i],
                      " must be row-major, got ", in[i].to_string());
    }

    build_descriptors();
    map_weight_space();
  }

  std::string implementation() const override {
    return detail::concat("cudnn rnn, math ",
                          math_ == CUDNN_FMA_MATH ? "fma(fp32)" : "default(tf32)");
  }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    copy_pieces(/*to_space=*/true);
    const bool train = training_;
    const void* hx = spec_.one_step ? x[1]->raw() : nullptr;
    const void* cx = spec_.one_step ? x[2]->raw() : nullptr;
    void* cy = spec_.one_step ? y[1]->raw() : nullptr;
    TBD_CUDNN_CHECK(cudnnRNNForward(
        cb_.cudnn(), rnn_.get(), train ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE,
        seq_lengths_.data<int32_t>(), x_desc_.get(), x[0]->raw(), y_desc_.get(), y[0]->raw(),
        h_desc_.get(), hx, nullptr, h_desc_.get(), cx, cy, weight_space_.bytes(),
        weight_space_.raw(), workspace_bytes_, workspace_.raw(), train ? reserve_bytes_ : 0,
        train ? reserve_.raw() : nullptr));
    forward_trained_ = train;
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs y) override {
    TBD_LAYER_CHECK(forward_trained_, spec_.kind, name_,
                    "backward needs a forward in training mode (cuDNN's reserve space)");
    auto out_or = [](Tensor* t, const Tensor& scratch) { return t ? t->raw() : scratch.raw(); };
    void* dx0 = out_or(dx[0], dx_scratch_);
    const void* hx = spec_.one_step ? x[1]->raw() : nullptr;
    const void* cx = spec_.one_step ? x[2]->raw() : nullptr;
    const void* dcy = spec_.one_step ? dy[1]->raw() : nullptr;
    void* dhx = spec_.one_step ? out_or(dx[1], dh_scratch_) : nullptr;
    void* dcx = spec_.one_step ? out_or(dx[2], dc_scratch_) : nullptr;
    // Data gradient first: cudnnRNNBackwardWeights_v8 reads what it leaves in the reserve space,
    // so it runs even when no input gradient is wanted (into a scratch buffer).
    TBD_CUDNN_CHECK(cudnnRNNBackwardData_v8(
        cb_.cudnn(), rnn_.get(), seq_lengths_.data<int32_t>(), y_desc_.get(), y[0]->raw(),
        dy[0]->raw(), x_desc_.get(), dx0, h_desc_.get(), hx, nullptr, dhx, h_desc_.get(), cx, dcy,
        dcx, weight_space_.bytes(), weight_space_.raw(), workspace_bytes_, workspace_.raw(),
        reserve_bytes_, reserve_.raw()));
    if (!param_grads()) return;
    TBD_CUDA_CHECK(cudaMemsetAsync(dweight_space_.raw(), 0, dweight_space_.bytes(), cb_.stream()));
    TBD_CUDNN_CHECK(cudnnRNNBackwardWeights_v8(
        cb_.cudnn(), rnn_.get(), CUDNN_WGRAD_MODE_ADD, seq_lengths_.data<int32_t>(), x_desc_.get(),
        x[0]->raw(), h_desc_.get(), hx, y_desc_.get(), y[0]->raw(), dweight_space_.bytes(),
        dweight_space_.raw(), workspace_bytes_, workspace_.raw(), reserve_bytes_, reserve_.raw()));
    copy_pieces(/*to_space=*/false);
  }

 private:
  void build_descriptors() {
    const int64_t H = spec_.hidden;
    math_ = cb_.math_mode() == MathMode::kFp32 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
    // No dropout between layers (the models put explicit Dropout layers where they want one).
    TBD_CUDNN_CHECK(cudnnSetDropoutDescriptor(dropout_.get(), cb_.cudnn(), 0.0f, nullptr, 0, 0));
    TBD_CUDNN_CHECK(cudnnSetRNNDescriptor_v8(
        rnn_.get(), CUDNN_RNN_ALGO_STANDARD, spec_.cell == Cell::kLstm ? CUDNN_LSTM : CUDNN_GRU,
        CUDNN_RNN_DOUBLE_BIAS, spec_.bidirectional ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL,
        CUDNN_LINEAR_INPUT, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, math_, static_cast<int32_t>(I_),
        static_cast<int32_t>(H), static_cast<int32_t>(H), static_cast<int32_t>(spec_.num_layers),
        dropout_.get(), CUDNN_RNN_PADDED_IO_DISABLED));

    // Every sequence has length T: the packed sequence-major layout is then exactly (T, N, .).
    std::vector<int32_t> lengths(static_cast<std::size_t>(N_), static_cast<int32_t>(T_));
    float padding = 0.0f;
    TBD_CUDNN_CHECK(cudnnSetRNNDataDescriptor(x_desc_.get(), CUDNN_DATA_FLOAT,
                                              CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED,
                                              static_cast<int>(T_), static_cast<int>(N_),
                                              static_cast<int>(I_), lengths.data(), &padding));
    TBD_CUDNN_CHECK(cudnnSetRNNDataDescriptor(
        y_desc_.get(), CUDNN_DATA_FLOAT, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED,
        static_cast<int>(T_), static_cast<int>(N_), static_cast<int>(H * dirs_), lengths.data(),
        &padding));
    const int h_dims[3] = {static_cast<int>(spec_.num_layers * dirs_), static_cast<int>(N_),
                           static_cast<int>(H)};
    const int h_strides[3] = {static_cast<int>(N_ * H), static_cast<int>(H), 1};
    TBD_CUDNN_CHECK(
        cudnnSetTensorNdDescriptor(h_desc_.get(), CUDNN_DATA_FLOAT, 3, h_dims, h_strides));

    seq_lengths_ = be_.empty(Shape{N_}, MemCategory::kDynamic, Layout::kRowMajor, DType::kI32);
    be_.copy_from_host(seq_lengths_, lengths.data());

    std::size_t ws = 0, rs = 0;
    TBD_CUDNN_CHECK(cudnnGetRNNTempSpaceSizes(cb_.cudnn(), rnn_.get(), CUDNN_FWD_MODE_TRAINING,
                                              x_desc_.get(), &ws, &rs));
    workspace_bytes_ = ws;
    reserve_bytes_ = rs;
    auto floats = [](std::size_t b) { return Shape{static_cast<int64_t>((b + 3) / 4)}; };
    // The workspace lives inside one call (transient: the graph's shared one); the reserve space
    // carries the forward's state to the backward.
    if (ws) transient(workspace_, TensorDesc{floats(ws)});
    if (rs) saved(reserve_, TensorDesc{floats(rs)});
    // cuDNN's data-gradient call always writes dx (and dhx, dcx for the cell): a transient
    // stands in when the caller wants no input gradient.
    transient(dx_scratch_, inputs_[0]);
    if (spec_.one_step) {
      transient(dh_scratch_, inputs_[1]);
      transient(dc_scratch_, inputs_[2]);
    }
  }

  // Finds where each gate block of each parameter lives in cuDNN's weight space.
  void map_weight_space() {
    std::size_t bytes = 0;
    TBD_CUDNN_CHECK(cudnnGetRNNWeightSpaceSize(cb_.cudnn(), rnn_.get(), &bytes));
    const auto floats = static_cast<int64_t>(bytes / sizeof(float));
    weight_space_ = be_.empty(Shape{floats}, MemCategory::kWorkspace);
    dweight_space_ = be_.empty(Shape{floats}, MemCategory::kWorkspace);
    // Zero once: LSTM's recurrent biases b_R are never written (see the file comment).
    TBD_CUDA_CHECK(cudaMemsetAsync(weight_space_.raw(), 0, bytes, cb_.stream()));

    const int64_t H = spec_.hidden, G = gates_of(spec_.cell);
    const int params_per_dir = spec_.cell == Cell::kLstm ? 3 : 4;
    TensorDescriptor m_desc, b_desc;
    auto* base = weight_space_.f32();
    for (int64_t l = 0; l < spec_.num_layers; ++l) {
      const int64_t in_l = l == 0 ? I_ : H * dirs_;
      for (int64_t d = 0; d < dirs_; ++d) {
        const int pseudo = static_cast<int>(l * dirs_ + d);
        const int first = pseudo * params_per_dir;  // w_ih, w_hh, b | b_ih, b_hh
        for (int64_t lin = 0; lin < 2 * G; ++lin) {
          void* m_addr = nullptr;
          void* b_addr = nullptr;
          TBD_CUDNN_CHECK(cudnnGetRNNWeightParams(cb_.cudnn(), rnn_.get(), pseudo, bytes, base,
                                                  static_cast<int32_t>(lin), m_desc.get(), &m_addr,
                                                  b_desc.get(), &b_addr));
          const bool recurrent = lin >= G;
          const int64_t gate = lin % G;
          const int64_t cols = recurrent ? H : in_l;
          TBD_CHECK(m_addr != nullptr && b_addr != nullptr, spec_.kind, " '", name_,
                    "': cuDNN has no matrix/bias for pseudo-layer ", pseudo, " linear layer ", lin);
          TBD_CHECK(numel_of(m_desc) == H * cols && numel_of(b_desc) == H, spec_.kind, " '", name_,
                    "': unexpected cuDNN weight block for pseudo-layer ", pseudo, " linear layer ",
                    lin);
          pieces_.push_back({first + (recurrent ? 1 : 0), gate * H * cols,
                             static_cast<float*>(m_addr) - base, H * cols});
          if (spec_.cell == Cell::kGru) {
            pieces_.push_back(
                {first + (recurrent ? 3 : 2), gate * H, static_cast<float*>(b_addr) - base, H});
          } else if (!recurrent) {
            pieces_.push_back({first + 2, gate * H, static_cast<float*>(b_addr) - base, H});
          }
        }
      }
    }
  }

  static int64_t numel_of(const TensorDescriptor& desc) {
    cudnnDataType_t type{};
    int nb = 0;
    std::array<int, 8> dims{}, strides{};
    TBD_CUDNN_CHECK(
        cudnnGetTensorNdDescriptor(desc.get(), 8, &type, &nb, dims.data(), strides.data()));
    int64_t n = 1;
    for (int i = 0; i < nb; ++i) n *= dims[static_cast<std::size_t>(i)];
    return n;
  }

  // to_space: params -> weight space (=). Otherwise weight-gradient space -> grads (+=).
  // Parameter pointers are read now, never cached (Graph::tie may re-point them).
  void copy_pieces(bool to_space) {
    SegmentBatch b;
    b.accumulate = !to_space;
    int64_t longest = 0;
    auto flush = [&] {
      if (b.count == 0) return;
      constexpr int kThreads = 256;
      auto blocks_x =
          static_cast<unsigned>(std::min<int64_t>((longest + kThreads - 1) / kThreads, 1024));
      copy_segments_kernel<<<dim3(blocks_x, static_cast<unsigned>(b.count)), kThreads, 0,
                             cb_.stream()>>>(b);
      TBD_CUDA_CHECK_LAST();
      b.count = 0;
      longest = 0;
    };
    for (const Piece& p : pieces_) {
      Param& prm = params_[static_cast<std::size_t>(p.param)];
      if (to_space) {
        b.src[b.count] = prm.value.f32() + p.param_offset;
        b.dst[b.count] = weight_space_.f32() + p.space_offset;
      } else {
        b.src[b.count] = dweight_space_.f32() + p.space_offset;
        b.dst[b.count] = prm.grad.f32() + p.param_offset;
      }
      b.n[b.count] = p.count;
      longest = std::max(longest, p.count);
      if (++b.count == kMaxSegments) flush();
    }
    flush();
  }

  RnnSpec spec_;
  CudaBackend& cb_;
  int64_t dirs_ = 1, T_ = 0, N_ = 0, I_ = 0;
  cudnnMathType_t math_ = CUDNN_FMA_MATH;
  RnnDescriptor rnn_;
  DropoutDescriptor dropout_;
  RnnDataDescriptor x_desc_, y_desc_;
  TensorDescriptor h_desc_;
  Tensor seq_lengths_, weight_space_, dweight_space_, workspace_, reserve_;
  Tensor dx_scratch_, dh_scratch_, dc_scratch_;
  std::size_t workspace_bytes_ = 0, reserve_bytes_ = 0;
  std::vector<Piece> pieces_;
  bool forward_trained_ = false;
};

class LstmCudnn final : public RnnCudnn {
 public:
  LstmCudnn(Backend& be, const std::string& name, const LstmConfig& c,
            const std::vector<TensorDesc>& in)
      : RnnCudnn(be, name,
                 {LstmConfig::kKind, Cell::kLstm, c.hidden, c.num_layers, c.bidirectional, false},
                 in, contract_of(name, c, in)) {}
};

class GruCudnn final : public RnnCudnn {
 public:
  GruCudnn(Backend& be, const std::string& name, const GruConfig& c,
           const std::vector<TensorDesc>& in)
      : RnnCudnn(be, name,
                 {GruConfig::kKind, Cell::kGru, c.hidden, c.num_layers, c.bidirectional, false}, in,
                 contract_of(name, c, in)) {}
};

class LstmCellCudnn final : public RnnCudnn {
 public:
  LstmCellCudnn(Backend& be, const std::string& name, const LstmCellConfig& c,
                const std::vector<TensorDesc>& in)
      : RnnCudnn(be, name, {LstmCellConfig::kKind, Cell::kLstm, c.hidden, 1, false, true}, in,
                 contract_of(name, c, in)) {}
};

TBD_REGISTER_LAYER(LstmConfig, DeviceKind::kCuda, LstmCudnn);
TBD_REGISTER_LAYER(GruConfig, DeviceKind::kCuda, GruCudnn);
TBD_REGISTER_LAYER(LstmCellConfig, DeviceKind::kCuda, LstmCellCudnn);

}  // namespace
}  // namespace tbd::cuda
