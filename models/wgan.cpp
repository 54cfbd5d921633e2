// models/wgan.cpp: the WGAN-GP training step and its two graphs (models/wgan.h).
#include "models/wgan.h"

#include "core/random.h"
#include "layers/activation.h"
#include "layers/batchnorm2d.h"
#include "layers/conv2d.h"
#include "layers/layer_norm.h"
#include "layers/linear.h"
#include "layers/loss.h"
#include "layers/mean_loss.h"
#include "layers/pool2d.h"
#include "layers/random_interpolation.h"
#include "layers/tensor_ops.h"
#include "layers/upsample.h"
#include "models/double_backward.h"
#include "models/registry.h"

namespace tbd {
namespace {

// Channel multipliers of DIM along each player (gan_64x64.py: 8, 8, 4, 2, 1 in the generator;
// 1, 2, 4, 8, 8 in the critic); fewer blocks keep the generator's last and the critic's first.
std::vector<int64_t> generator_widths(const WganOptions& o) {
  const std::vector<int64_t> full{8, 8, 4, 2, 1};
  std::vector<int64_t> w(full.end() - (o.blocks + 1), full.end());
  for (int64_t& c : w) c *= o.dim;
  return w;
}
std::vector<int64_t> critic_widths(const WganOptions& o) {
  const std::vector<int64_t> full{1, 2, 4, 8, 8};
  std::vector<int64_t> w(full.begin(), full.begin() + (o.blocks + 1));
  for (int64_t& c : w) c *= o.dim;
  return w;
}

// One application of a player: adds its layers to `g` under `prefix`. With `owner` (an earlier
// application's layers), each new layer's parameters are tied to the owner's layer of the same
// position, in this graph or a graph bound before (Graph::bind_arena).
struct Player {
  Player(Graph& graph, std::string name, const std::vector<Layer*>* tie_to = nullptr)
      : g(graph), prefix(std::move(name)), owner(tie_to) {}
  Graph& g;
  std::string prefix;
  const std::vector<Layer*>* owner;
  std::vector<Layer*> layers;  // this application's layers with parameters, in order

  template <class Config>
  TensorId add(const std::string& name, const Config& cfg, std::vector<TensorId> in) {
    const TensorId y = g.add1(prefix + "." + name, cfg, std::move(in));
    Layer& l = *g.nodes().back().layer;
    if (l.params().empty()) return y;
    if (owner != nullptr) {
      Layer& src = *owner->at(layers.size());
      for (std::size_t k = 0; k < l.params().size(); ++k) g.tie(l.params()[k], src.params()[k]);
    }
    layers.push_back(&l);
    return y;
  }
};

const ActivationConfig kRelu{ActKind::kRelu};

// Up-sampling residual block: shortcut = upsample, conv 1x1 (+b); main = BN, ReLU, upsample,
// conv 3x3 (no bias), BN, ReLU, conv 3x3 (+b).
TensorId residual_up(Player& p, const std::string& n, TensorId x, int64_t out) {
  TensorId s = p.add(n + ".shortcut_up", Upsample2dConfig{}, {x});
  s = p.add(n + ".shortcut", Conv2dConfig::square(out, 1, 1, 0, true), {s});
  TensorId h = p.add(n + ".bn1", BatchNorm2dConfig{}, {x});
  h = p.add(n + ".relu1", kRelu, {h});
  h = p.add(n + ".conv1_up", Upsample2dConfig{}, {h});
  h = p.add(n + ".conv1", Conv2dConfig::square(out, 3, 1, 1), {h});
  h = p.add(n + ".bn2", BatchNorm2dConfig{}, {h});
  h = p.add(n + ".relu2", kRelu, {h});
  h = p.add(n + ".conv2", Conv2dConfig::square(out, 3, 1, 1, true), {h});
  return p.add(n + ".add", AddConfig{}, {s, h});
}

// Down-sampling residual block: shortcut = mean pool, conv 1x1 (+b); main = LN, ReLU, conv 3x3
// in->in (no bias), LN, ReLU, conv 3x3 in->out (+b), mean pool.
TensorId residual_down(Player& p, const std::string& n, TensorId x, int64_t in, int64_t out) {
  const Pool2dConfig mean_pool = Pool2dConfig::square(PoolKind::kAvg, 2, 2);
  LayerNormConfig ln;
  ln.over = LayerNormOver::kChw;
  TensorId s = p.add(n + ".shortcut_pool", mean_pool, {x});
  s = p.add(n + ".shortcut", Conv2dConfig::square(out, 1, 1, 0, true), {s});
  TensorId h = p.add(n + ".ln1", ln, {x});
  h = p.add(n + ".relu1", kRelu, {h});
  h = p.add(n + ".conv1", Conv2dConfig::square(in, 3, 1, 1), {h});
  h = p.add(n + ".ln2", ln, {h});
  h = p.add(n + ".relu2", kRelu, {h});
  h = p.add(n + ".conv2", Conv2dConfig::square(out, 3, 1, 1, true), {h});
  h = p.add(n + ".conv2_pool", mean_pool, {h});
  return p.add(n + ".add", AddConfig{}, {s, h});
}

// z (N, z_dim) -> images (N, 3, S, S) in (-1, 1).
TensorId generator(Player& p, TensorId z, const WganOptions& o) {
  const std::vector<int64_t> w = generator_widths(o);
  LinearConfig in;
  in.out_features = w[0] * 4 * 4;
  TensorId h = p.add("input", in, {z});
  h = p.add("reshape", ReshapeConfig{{-1, w[0], 4, 4}}, {h});
  for (int b = 0; b < o.blocks; ++b) h = residual_up(p, "res" + std::to_string(b + 1), h, w[b + 1]);
  h = p.add("out_bn", BatchNorm2dConfig{}, {h});
  h = p.add("out_relu", kRelu, {h});
  h = p.add("output", Conv2dConfig::square(3, 3, 1, 1, true), {h});
  return p.add("tanh", ActivationConfig{ActKind::kTanh}, {h});
}

// images (N, 3, S, S) -> scores (N, 1).
TensorId critic(Player& p, TensorId x, const WganOptions& o) {
  const std::vector<int64_t> w = critic_widths(o);
  TensorId h = p.add("input", Conv2dConfig::square(w[0], 3, 1, 1, true), {x});
  for (int b = 0; b < o.blocks; ++b) {
    h = residual_down(p, "res" + std::to_string(b + 1), h, w[b], w[b + 1]);
  }
  h = p.add("flatten", ReshapeConfig{{-1, w.back() * 4 * 4}}, {h});
  LinearConfig out;
  out.out_features = 1;
  return p.add("output", out, {h});
}

class Wgan final : public Model {
 public:
  Wgan(Backend& be, const WganOptions& o) : Model(be, "WGAN", o.seed), o_(o) {
    TBD_CHECK(o.blocks >= 1 && o.blocks <= 4, "WGAN: blocks=", o.blocks, " must be in 1..4");
    TBD_CHECK(o.critic_iters >= 1, "WGAN: critic_iters=", o.critic_iters, " must be >= 1");
    const int64_t N = o.batch, S = wgan_image_size(o);
    critic_g_ = &graph();
    gen_g_ = &add_graph();
    Graph& g0 = *critic_g_;
    Graph& g1 = *gen_g_;

    // The generator's step (graph 1) owns the generator.
    gen_z_ = g1.input("z", Shape{N, o.z_dim});
    Player gen{g1, "generator"};
    const TensorId gen_fake = generator(gen, gen_z_, o);

    // The critic's step (graph 0): G(z) as data, the critic on real, fake and interpolated
    // images, the penalty through the input gradient of the last.
    real_ = g0.input("real", Shape{N, 3, S, S});
    critic_z_ = g0.input("z", Shape{N, o.z_dim});
    Player gen_in_critic{g0, "generator", &gen.layers};
    TensorId fake = generator(gen_in_critic, critic_z_, o);
    fake = g0.add1("fake.detach", DetachConfig{}, {fake});
    Player d_real{g0, "critic"};
    const TensorId s_real = critic(d_real, real_, o);
    Player d_fake{g0, "critic_fake", &d_real.layers};
    const TensorId s_fake = critic(d_fake, fake, o);
    RandomInterpolationConfig mix;
    mix.seed = o.seed;
    const TensorId x_hat = g0.add1("gp.mix", mix, {real_, fake});
    Player d_hat{g0, "critic_interp", &d_real.layers};
    const TensorId s_hat = critic(d_hat, x_hat, o);
    const InputGradient ig = append_input_gradient(g0, x_hat, s_hat, "gp");
    seed_ = ig.seed;
    const TensorId gp = g0.add1("gp.penalty", GradientPenaltyConfig{o.lambda, 1.0}, {ig.dx});
    const TensorId l_fake = g0.add1("loss.fake", MeanLossConfig{1.0}, {s_fake});
    const TensorId l_real = g0.add1("loss.real", MeanLossConfig{-1.0}, {s_real});
    const TensorId wdist = g0.add1("loss.wasserstein", AddConfig{}, {l_fake, l_real});
    g0.keep(wdist);  // the critic's Wasserstein estimate, readable after a step
    g0.set_loss(g0.add1("loss", AddConfig{}, {wdist, gp}));
    g0.set_param_grads("generator", false);  // runs forward only (detached) in any case

    // The generator's loss through the critic, whose parameters this step does not train.
    Player d_gen{g1, "critic", &d_real.layers};
    const TensorId s_gen = critic(d_gen, gen_fake, o);
    g1.set_loss(g1.add1("loss", MeanLossConfig{-1.0}, {s_gen}));
    g1.set_param_grads("critic", false);

    set_samples_per_step(N);
    set_extra_items("critic_steps", o.critic_iters);
    if (o.build_only) return;

    // Each graph ties to the other's parameters: bind both arenas, then finalize both.
    g0.bind_arena();
    g1.bind_arena();
    g0.finalize();
    g1.finalize();
    AdamConfig adam;
    adam.lr = o.lr;
    adam.beta1 = 0.0;
    adam.beta2 = 0.9;
    add_optimizer(make_optimizer(be, adam, g0.params()));  // 0: the critic's
    add_optimizer(make_optimizer(be, adam, g1.params()));  // 1: the generator's
    be.fill(g0.tensor(seed_), 1.f);                        // d sum(D(x_hat)) / d x_hat

    // The data pool (see the header): per iteration, a real and a noise batch per critic step
    // and a noise batch for the generator step.
    Rng rng(seed_for(o.seed, "wgan.data"));
    for (int i = 0; i < o.critic_iters; ++i) add_pool(real_pool_, g0.desc(real_), rng, false);
    for (int i = 0; i <= o.critic_iters; ++i) add_pool(noise_pool_, g0.desc(critic_z_), rng, true);

    // The step: the generator's (graph 1, optimizer 1) on the pool's last noise batch, then
    // n_critic critic steps (graph 0, optimizer 0), each on the next real and noise batch. The
    // copies from the pool into the inputs read and write each batch (2x its bytes).
    StepPart gen_step = passes(1, 1, 1, "gen_step");
    gen_step.prepare = [this](int) { load(gen_g_->tensor(gen_z_), noise_pool_.back()); };
    gen_step.prepare_bytes = 2.0 * static_cast<double>(g1.tensor(gen_z_).bytes());
    StepPart critic_step = passes(0, 0, o.critic_iters, "critic_step");
    critic_step.prepare = [this](int k) {
      load(critic_g_->tensor(real_), real_pool_[static_cast<std::size_t>(k)]);
      load(critic_g_->tensor(critic_z_), noise_pool_[static_cast<std::size_t>(k)]);
    };
    critic_step.prepare_bytes =
        2.0 * static_cast<double>(g0.tensor(real_).bytes() + g0.tensor(critic_z_).bytes());
    set_step_plan({gen_step, critic_step});
  }

 private:
  struct Batch {
    Tensor device;
    std::vector<float> host;  // the same values, for --tbd_h2d_per_step
  };

  void add_pool(std::vector<Batch>& pool, const TensorDesc& d, Rng& rng, bool normal) {
    Batch b;
    b.host.resize(static_cast<std::size_t>(d.shape.numel()));
    for (float& v : b.host) v = static_cast<float>(normal ? rng.normal() : rng.uniform(-1, 1));
    b.device = backend().empty(d, MemCategory::kDynamic);
    backend().copy_from_host(b.device, b.host.data());
    pool.push_back(std::move(b));
  }
  void load(const Tensor& dst, const Batch& b) {
    if (h2d_per_step()) {
      backend().copy_from_host(dst, b.host.data());
    } else {
      backend().reorder(dst, b.device);  // same layout: a device copy
    }
  }

  WganOptions o_;
  Graph* critic_g_ = nullptr;
  Graph* gen_g_ = nullptr;
  TensorId real_ = -1, critic_z_ = -1, gen_z_ = -1, seed_ = -1;
  std::vector<Batch> real_pool_, noise_pool_;
};

}  // namespace

int64_t wgan_image_size(const WganOptions& o) { return int64_t{4} << o.blocks; }

std::unique_ptr<Model> build_wgan(Backend& be, const WganOptions& o) {
  return std::make_unique<Wgan>(be, o);
}

TensorId wgan_critic(Graph& g, TensorId x, const WganOptions& o, const std::string& prefix) {
  Player p(g, prefix);
  return critic(p, x, o);
}

WganOptions wgan_tiny(uint64_t seed) {
  WganOptions o;
  o.batch = 8;
  o.dim = 4;
  o.blocks = 1;
  o.seed = seed;
  o.lr = 1e-3;
  return o;
}

TBD_REGISTER_MODEL(ModelEntry{"WGAN",
                              {1, 2, 4, 8, 16, 32, 64, 96, 128},
                              1,
                              [](Backend& be, const ModelArgs& a) {
                                WganOptions o;
                                o.batch = a.batch;
                                o.build_only = a.build_only;
                                return build_wgan(be, o);
                              },
                              {}});

}  // namespace tbd
